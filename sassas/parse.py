"""Parse stage: source text -> Program (kernels of labels and instructions), via grammar.lark."""
from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Optional

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from .arch import get_arch
from .ast import ControlCode, Instruction, Kernel, Label, Loc, Param, Program
from .control import MAX_BARRIER, parse_control
from .errors import Diagnostics, SassError
from .frontend import DEFAULT_SMEM_ALIGN, Declarations, finish_kernel
from .operands import canonical_operand, parse_number, parse_register
from .regalloc import AutoName

# TuringAs reads the wait field as a *decimal* number whose bits are the barriers to wait on
# (`03` = barriers 0 and 1, `12` = barriers 2 and 3); it has two characters.
_DECIMAL_WAIT = re.compile(r"\d\d")


def read_control(text: str, loc: Optional[Loc] = None) -> ControlCode:
    """A control prefix as TuringAs reads it. A two-digit wait field is decimal; a field with
    a hex letter (`0c`, as hex-minded listings write it) cannot be decimal and is read as hex;
    six positions (`-----1`) name one barrier each. The rest is sassas.control's."""
    wait, rest = text.split(":", 1)
    if rest.endswith(":-"):
        raise SassError("stall '-' (TuringAs: the opcode's default latency) is not supported: "
                        "write the stall cycles, hex 0..f", loc)
    if _DECIMAL_WAIT.fullmatch(wait):
        mask = int(wait, 10)
        if mask >> (MAX_BARRIER + 1):
            raise SassError(f"wait mask {mask} names a barrier above {MAX_BARRIER} (the field is a "
                            f"decimal bit mask, as in TuringAs: 63 waits on all six)", loc)
        # Hand it on in the positional form, which no reading can take for another mask.
        wait = "".join(str(b) if mask >> b & 1 else "-" for b in range(MAX_BARRIER + 1))
    return parse_control(f"{wait}:{rest}", loc)


@functools.lru_cache(maxsize=None)
def _parser() -> Lark:
    grammar = resources.files("sassas").joinpath("grammar.lark").read_text()
    # LALR with the contextual lexer: one pass, and a token is only tried where it may stand.
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=False,
                maybe_placeholders=False, cache=False)


class Lines:
    """Maps positions in the parsed text back to source locations."""

    def __init__(self, text: str, filename: str, origins: Optional[list[Optional[Loc]]] = None,
                 sources: Optional[list[tuple[str, int]]] = None):
        self.filename = filename
        self.lines = text.split("\n")
        # origins[i]: where line i+1 was generated from (include, <code> block); None if written.
        self.origins = origins
        # sources[i]: (file, line) that line i+1 really stands on, when preprocessing moved it.
        self.sources = sources

    def loc(self, line: int, col: int) -> Loc:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        origin = self.origins[line - 1] if self.origins and 0 < line <= len(self.origins) else None
        file, src_line = self.filename, line
        if self.sources and 0 < line <= len(self.sources):
            file, src_line = self.sources[line - 1]
        return Loc(file, src_line, col, text, origin)


class _Build(Transformer):
    def __init__(self, lines: Lines):
        super().__init__(visit_tokens=False)
        self.L = lines

    def _loc(self, tok: Token) -> Loc:
        return self.L.loc(tok.line, tok.column)

    def start(self, items):
        return items

    def label(self, items):
        tok = items[0]
        return Label(tok.value[:-1], self._loc(tok))

    def operand(self, atoms):
        return canonical_operand(atoms, self._loc(atoms[0]))

    def operands(self, ops):
        return ops

    def statement(self, items):
        control = predicate = None
        operands = []
        hexwords = []
        first = None
        mnemonic = None
        for it in items:
            if isinstance(it, Token):
                first = first or it
                if it.type == "CONTROL":
                    control = read_control(it.value, self._loc(it))
                elif it.type == "PREDICATE":
                    predicate = _predicate(it.value, self._loc(it))
                elif it.type == "MNEMONIC":
                    mnemonic = it
                elif it.type == "HEXWORD":
                    hexwords.append(int(it.value[2:-2].strip(), 16))
            elif isinstance(it, list):
                operands = it
        parts = mnemonic.value.split(".")
        inst = Instruction(opcode=parts[0], modifiers=tuple(p for p in parts[1:]),
                           operands=tuple(operands), predicate=predicate, control=control,
                           loc=self._loc(first if first.type != "ADDRESS" else mnemonic))
        if control is None and len(hexwords) >= 2:
            # Listings print the control bits only inside the instruction's hex: take them
            # from bits 105..127 (and nothing else from the hex).
            inst.control = ControlCode.from_word(hexwords[1] << 64 | hexwords[0])
        return inst

    def _num(self, tok: Token) -> int:
        v = parse_number(tok.value)
        if not isinstance(v, int):
            raise SassError(f"expected an integer, found '{tok.value}'", self._loc(tok))
        return v

    def kernel(self, items):
        return ("kernel", items[0].value, self._loc(items[0]))

    def param(self, items):
        name = items[0]
        size = self._num(items[1])
        align = self._num(items[2]) if len(items) > 2 else min(size, 8) if size in (1, 2, 4, 8) else 4
        return ("param", Param(name.value, size, align, loc=self._loc(name)), self._loc(name))

    def _directive_number(name):
        def f(self, items):
            return (name, self._num(items[0]), self._loc(items[0]))
        return f

    shared = _directive_number("shared")
    registers = _directive_number("registers")
    maxthreads = _directive_number("maxthreads")

    def constbank(self, items):
        bank, offset, word = (self._num(t) for t in items)
        loc = self._loc(items[0])
        if not 1 <= bank <= 17 or offset % 4 or not 0 <= word < 1 << 32:
            raise SassError(".constbank takes a bank 1..17, a 4-byte aligned offset and a 32-bit word", loc)
        return ("constbank", (bank, offset, word), loc)
    minblocks = _directive_number("minblocks")
    align = _directive_number("align")

    def reg(self, items):
        name = items[0]
        reg = parse_register(items[1].value, self._loc(items[1])) if len(items) > 1 else None
        return ("reg", (name.value, reg), self._loc(name))

    def regs(self, items):
        name = items[0]
        first, last = self._num(items[1]), self._num(items[2])
        if last < first:
            raise SassError(f"'{name.value}<{first}-{last}>': the range runs backwards", self._loc(items[1]))
        if last - first > 254:
            raise SassError(f"'{name.value}<{first}-{last}>' has more names than there are registers",
                            self._loc(items[1]))
        base = parse_register(items[3].value, self._loc(items[3])) if len(items) > 3 else None
        return ("regs", (name.value, first, last, base), self._loc(name))

    def const(self, items):
        return ("const", (items[0].value, self._num(items[1])), self._loc(items[0]))

    def smem(self, items):
        size = self._num(items[1])
        align = self._num(items[2]) if len(items) > 2 else None
        return ("smem", (items[0].value, size, align), self._loc(items[0]))

    def arch(self, items):
        return ("arch", items[0].value, self._loc(items[0]))

    def raw(self, items):
        return ("raw", (self._num(items[0]), self._num(items[1])), self._loc(items[0]))


def _predicate(text: str, loc: Loc):
    from .operands import Atom
    neg = text[1] == "!"
    reg = text[2:] if neg else text[1:]
    atoms = ([Atom("BANG", "!")] if neg else []) + [Atom("REGISTER", reg)]
    return canonical_operand(atoms, loc)


_EXPECTED_NAMES = {
    "SEMICOLON": "';'", "COMMA": "','", "MNEMONIC": "an opcode", "REGISTER": "a register",
    "NUMBER": "a number", "NAME": "a name", "LBRACKET": "'['", "RBRACKET": "']'",
    "LABEL": "a label", "CONTROL": "a control code", "PREDICATE": "a predicate",
}


def _describe_expected(expected) -> str:
    names = sorted({_EXPECTED_NAMES.get(e, e) for e in expected if not e.startswith("__")})
    if len(names) > 6:
        return "an instruction, label or directive" if "an opcode" in names else ", ".join(names[:6]) + ", ..."
    return " or ".join(names)


_STATEMENT_START = re.compile(r"\s*([0-9a-fA-F-]{1,6}:[0-7-]:[0-7-]:[yY-]:[0-9a-fA-F]{1,2}|@|[A-Z][A-Z0-9_]*\b)")
_COMMENT_TAIL = re.compile(r"\s*(#|//).*$")


def _missing_semicolon(text: str, pos: int, lines: Lines) -> Optional[SassError]:
    """If the error sits on a line that starts a statement while the statement before it
    never ended, the real mistake is the missing ';' at the end of that earlier line."""
    line_start = text.rfind("\n", 0, pos) + 1
    if not _STATEMENT_START.match(text, line_start):
        return None
    prev_end = line_start - 1
    while prev_end > 0:
        prev_start = text.rfind("\n", 0, prev_end) + 1
        prev = _COMMENT_TAIL.sub("", text[prev_start:prev_end]).rstrip()
        if prev.strip():
            if prev.endswith((";", ":", "*/")) or prev.lstrip().startswith((".", "<")):
                return None
            line = text.count("\n", 0, prev_start) + 1
            return SassError("expected ';' after the instruction", lines.loc(line, len(prev) + 1))
        prev_end = prev_start - 1
    return None


def _syntax_error(e: UnexpectedInput, text: str, lines: Lines) -> SassError:
    pos = getattr(e, "pos_in_stream", None)
    if pos is None and isinstance(e, UnexpectedToken):
        pos = e.token.start_pos
    if pos is not None and pos >= 0:
        missing = _missing_semicolon(text, pos, lines)
        if missing is not None:
            return missing
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        return SassError(f"unexpected character '{ch}'", lines.loc(e.line, e.column))
    if isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        pos = len(text.rstrip())
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        exp = e.expected if hasattr(e, "expected") else ()
        what = "expected ';' at the end of the instruction" if "SEMICOLON" in exp else "unexpected end of input"
        return SassError(what, lines.loc(line, col))
    tok = e.token
    expected = set(e.expected)
    if "SEMICOLON" in expected and tok.type in ("MNEMONIC", "CONTROL", "PREDICATE", "LABEL", "ADDRESS"):
        # A statement ran on into the next line: point just after the last thing written.
        pos = tok.start_pos
        while pos > 0 and text[pos - 1].isspace():
            pos -= 1
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        return SassError("expected ';' after the instruction", lines.loc(line, col))
    if tok.type == "MNEMONIC" and "MNEMONIC" not in expected:
        return SassError(f"unexpected '{tok.value}': expected {_describe_expected(expected)}",
                         lines.loc(tok.line, tok.column))
    if tok.type in ("NAME", "REGISTER", "NUMBER") and "MNEMONIC" in expected:
        return SassError(f"expected an opcode, found '{tok.value}' (opcodes are upper case)",
                         lines.loc(tok.line, tok.column))
    return SassError(f"unexpected '{tok.value}': expected {_describe_expected(expected)}",
                     lines.loc(tok.line, tok.column))


def parse_items(text: str, filename: str = "<input>", lines: Optional[Lines] = None) -> list:
    """Parse text into a flat list of Label, Instruction and directive tuples."""
    lines = lines or Lines(text, filename)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, text, lines) from None
    try:
        return _Build(lines).transform(tree)
    except Exception as e:  # Lark wraps errors raised in callbacks
        inner = getattr(e, "orig_exc", e)
        if isinstance(inner, SassError):
            raise inner from None
        raise


def parse_instruction(text: str, filename: str = "<input>") -> Instruction:
    """Parse one instruction as nvdisasm prints it (the trailing ';' may be left out)."""
    t = text.strip()
    if not re.search(r";\s*(/\*.*\*/\s*)*$", t):
        t += " ;"
    items = parse_items(t, filename)
    insts = [i for i in items if isinstance(i, Instruction)]
    if len(insts) != 1:
        raise SassError(f"expected one instruction, found {len(insts)}", Loc(filename, 1, 1, text))
    return insts[0]


def parse_program(text: str, arch: str, filename: str = "<input>", lines: Optional[Lines] = None,
                  default_kernel: Optional[str] = None, diagnostics: Optional[Diagnostics] = None,
                  auto_reuse: bool = False) -> Program:
    """Group the parsed items into kernels: `.kernel NAME` starts one; before any, the file's
    statements belong to a kernel named after the file (or `default_kernel`). Each kernel then
    goes through the front end's last pass (names, checks: :mod:`sassas.frontend`).

    Errors found after parsing are collected and raised together; warnings go to
    `diagnostics` (a fresh one, dropped, when none is given)."""
    diags = diagnostics if diagnostics is not None else Diagnostics()
    items = parse_items(text, filename, lines)
    program = Program(arch=arch, file=filename)
    declarations: dict[int, Declarations] = {}
    current: Optional[Kernel] = None

    def start_kernel(name: str, loc) -> Kernel:
        nonlocal current
        current = Kernel(name=name, loc=loc)
        program.kernels.append(current)
        declarations[id(current)] = Declarations()
        return current

    def kernel_here(loc) -> Kernel:
        return current if current is not None else start_kernel(default_kernel or _stem(filename), loc)

    pending_raw = None
    for it in items:
        if not isinstance(it, tuple):
            k = kernel_here(it.loc)
            if isinstance(it, Instruction) and pending_raw is not None:
                it.raw = pending_raw
                pending_raw = None
            k.body.append(it)
            continue
        kind, value, loc = it
        try:
            if kind == "kernel":
                if any(k.name == value for k in program.kernels):
                    raise SassError(f"kernel '{value}' defined twice", loc)
                start_kernel(value, loc)
            elif kind == "arch":
                if value != arch:
                    raise SassError(f"this file is written for {value}, but --arch is {arch}", loc)
            elif kind == "raw":
                pending_raw = value
            else:
                _declare(kernel_here(loc), declarations, kind, value, loc)
        except SassError as e:
            diags.error(e)
    if not program.kernels:
        first = lines.loc(1, 1) if lines is not None else Loc(filename, 1, 1, text.split("\n", 1)[0])
        diags.error(SassError("nothing to assemble: the input has no instructions", first))
    target = get_arch(arch)
    for kernel in program.kernels:
        try:
            finish_kernel(kernel, declarations[id(kernel)], diags, auto_reuse=auto_reuse)
        except SassError as e:
            diags.error(e)
        if kernel.shared_bytes > target.max_shared_per_block:
            diags.error(SassError(f"kernel '{kernel.name}' has {kernel.shared_bytes} bytes of shared memory; "
                                  f"{target.name} allows {target.max_shared_per_block}", kernel.loc))
        if kernel.registers is not None and not 1 <= kernel.registers <= target.max_registers:
            diags.error(SassError(f"kernel '{kernel.name}': .registers {kernel.registers} out of range "
                                  f"1..{target.max_registers}", kernel.loc))
    diags.raise_if_errors()
    return program


def _declare(k: Kernel, declarations: dict, kind: str, value, loc) -> None:
    """A directive that declares something of kernel `k`."""
    decls: Declarations = declarations[id(k)]
    if kind == "param":
        if any(p.name == value.name for p in k.params):
            raise SassError(f"parameter '{value.name}' declared twice", loc)
        k.params.append(value)
    elif kind == "shared":
        k.shared_bytes = value
    elif kind == "registers":
        k.registers = value
    elif kind == "maxthreads":
        k.max_threads = value
    elif kind == "minblocks":
        k.min_blocks = value
    elif kind == "constbank":
        bank, offset, word = value
        data = k.attributes.setdefault("constant_banks", {}).setdefault(bank, bytearray())
        if len(data) < offset + 4:
            data.extend(bytes(offset + 4 - len(data)))
        data[offset:offset + 4] = word.to_bytes(4, "little")
    elif kind == "reg":
        name, reg = value
        decls.declare(name, loc)
        if reg is None:
            decls.autos.append(AutoName([name], loc))
        else:
            decls.registers[name] = (*reg, loc)
    elif kind == "regs":
        prefix, first, last, base = value
        names = [f"{prefix}{i}" for i in range(first, last + 1)]
        for name in names:
            decls.declare(name, loc)
        if base is None:
            decls.autos.append(AutoName(names, loc))
        else:
            cls, n = base
            if n + len(names) - 1 > 254:
                raise SassError(f"'{prefix}<{first}-{last}>' from {cls}{n} runs past {cls}254", loc)
            for i, name in enumerate(names):
                decls.registers[name] = (cls, n + i, loc)
    elif kind == "const":
        name, size = value
        decls.declare(name, loc)
        decls.consts.append((name, size, loc))
    elif kind == "smem":
        name, size, align = value
        decls.declare(name, loc)
        decls.smem.append((name, size, align if align is not None else DEFAULT_SMEM_ALIGN, loc))


def _stem(filename: str) -> str:
    import os
    base = os.path.basename(filename)
    stem = base.rsplit(".", 1)[0] if "." in base else base
    stem = re.sub(r"\W", "_", stem) or "kernel"
    return "kernel" if stem in ("<input>", "_input_") else stem
