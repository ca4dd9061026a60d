from .learn import main

raise SystemExit(main())
