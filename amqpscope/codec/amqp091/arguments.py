"""Method arguments, decoded by functions generated from the spec's table, once per method.

Every method gets its own small decoder, written from its argument list (never by hand): a
straight sequence of steps, one per string or table and one `struct.Struct.unpack_from` per run
of fixed-width integers and bits (consecutive `bit`s share octets as the spec packs them: first
bit lowest, 8 to an octet). The values land in locals and the result is one dict literal, which
is several times faster than filling a dict step by step; `MethodArguments.source` shows the
generated code. Every length is checked against the end of the arguments before it is used, so
nothing is read past the frame, and damage becomes problems, never exceptions.

The same code, typed, is written out for every argument list of both tables to argdecoders.py
(`write_module`; a test keeps it current), which the compiled build compiles with the rest: there
the decoders are C instead of code the interpreter runs (a tenth of a compiled 0-9-1 `summary`
was spent in them). The pure build generates them as it needs them, as before.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from amqpscope.codec.amqp091.fieldtable import U32, Malformed, read_table, text, timestamp

#: struct codes of the spec's fixed-width domains
FIXED: Final = {"octet": "B", "short": "H", "long": "I", "longlong": "Q", "timestamp": "Q"}
#: conversions of fixed-width values (the rest are plain ints)
CONVERT: Final[dict[str, Callable[[int], Any]]] = {"timestamp": timestamp}
BAD_ARGUMENTS: Final = "amqp091.bad-arguments"
BAD_TABLE: Final = "amqp091.bad-field-table"
TRAILING: Final = "amqp091.trailing-bytes"


class Truncated(Exception):
    """The value named `args[0]` runs past the end of what holds it; `args[1]` holds the values
    decoded before it."""


#: a single-value reader: (buffer, offset, end) -> (value, next offset)
Reader = Callable[[bytes, int, int], tuple[Any, int]]
#: a method's generated decoder: (frame, position, limit, problems) -> (fields, position after)
Run = Callable[[bytes, int, int, list], tuple[dict[str, Any], int]]


def read_shortstr(buf: bytes, pos: int, limit: int) -> tuple[Any, int]:
    if pos >= limit:
        raise Truncated("shortstr length", {})
    end = pos + 1 + buf[pos]
    if end > limit:
        raise Truncated(f"shortstr of {end - pos - 1} bytes", {})
    return text(buf[pos + 1 : end]), end


def read_longstr(buf: bytes, pos: int, limit: int) -> tuple[Any, int]:
    if pos + 4 > limit:
        raise Truncated("longstr length", {})
    end = pos + 4 + U32.unpack_from(buf, pos)[0]
    if end > limit:
        raise Truncated(f"longstr of {end - pos - 4} bytes", {})
    return text(buf[pos + 4 : end]), end


def _fixed_reader(domain: str) -> Reader:
    st = struct.Struct(">" + FIXED[domain])
    size = st.size
    convert = CONVERT.get(domain)

    def read(buf: bytes, pos: int, limit: int) -> tuple[Any, int]:
        if pos + size > limit:
            raise Truncated(domain, {})
        value = st.unpack_from(buf, pos)[0]
        return (convert(value) if convert else value), pos + size

    return read


#: domain -> reader of one value of it (content properties are read one at a time)
READERS: Final[dict[str, Reader]] = {
    "shortstr": read_shortstr,
    "longstr": read_longstr,
    "table": read_table,
    **{domain: _fixed_reader(domain) for domain in FIXED},
}


def skip_table(name: str, exc: Malformed, buf: bytes, pos: int, limit: int, problems: list) -> int:
    """A malformed table: note it; where its length fits the frame, go on after it (the
    arguments that follow still decode), else -1 (decoding stops)."""
    problems.append((BAD_TABLE, f"{name}: {exc}"))
    if pos + 4 <= limit and (end := pos + 4 + U32.unpack_from(buf, pos)[0]) <= limit:
        return end
    return -1


class _Writer:
    """The generated source of one method's decoder, step by step. `typed`: with annotations,
    as argdecoders.py has it (mypyc compiles it typed); `prefix` names its structs."""

    def __init__(self, name: str = "decode", prefix: str = "S", typed: bool = False) -> None:
        self.typed = typed
        self.prefix = prefix
        if typed:
            signature = "(buf: bytes, pos: int, limit: int, problems: list) -> tuple[dict, int]"
        else:
            signature = "(buf, pos, limit, problems)"
        self.lines = [f"def {name}{signature}:"]
        self.names: list[tuple[str, str]] = []  # (argument name, local variable) decoded so far
        self.structs: dict[str, struct.Struct] = {}
        self.values: dict[str, None] = {}  # the locals that hold values (declared Any, typed)

    def partial(self) -> str:
        return "{" + ", ".join(f"{name!r}: {var}" for name, var in self.names) + "}"

    def new(self, name: str) -> str:
        var = f"a{len(self.names)}"
        self.names.append((name, var))
        self.values[var] = None
        return var

    def emit(self, *lines: str) -> None:
        self.lines.extend("    " + line for line in lines)

    def string(self, name: str, width: int) -> None:
        """A shortstr (width 1) or longstr (width 4): length, then that many bytes."""
        if width == 1:
            length = "buf[pos]"
        elif self.typed:  # compiled: read byte by byte, natively (no call, no tuple)
            length = "(" + _big_endian(0, 4) + ")"
        else:
            length = "U32.unpack_from(buf, pos)[0]"
        truncated = f"raise Truncated({name!r}, {self.partial()})"
        var = self.new(name)
        self.emit(
            f"if pos + {width} > limit: {truncated}",
            f"end = pos + {width} + {length}",
            f"if end > limit: {truncated}",
            f"raw = buf[pos + {width}:end]",
            "try:",
            f"    {var} = raw.decode()",
            "except UnicodeDecodeError:",
            f"    {var} = {{'hex': raw.hex()}}",
            "pos = end",
        )

    def table(self, name: str) -> None:
        before = self.partial()
        var = self.new(name)
        self.emit(
            "try:",
            f"    {var}, pos = read_table(buf, pos, limit)",
            "except Malformed as exc:",
            f"    {var} = exc.partial",
            f"    pos = skip_table({name!r}, exc, buf, pos, limit, problems)",
            f"    if pos < 0: return {{**{before}, {name!r}: {var}}}, -1",
        )

    def fixed(self, run: list[tuple[Any, str]]) -> None:
        """One unpack for a run of integers and bit groups ((names, "bit")); typed (compiled),
        each read byte by byte instead, which mypyc makes native reads with no call and no
        tuple."""
        fmt = ">" + "".join("B" if domain == "bit" else FIXED[domain] for _, domain in run)
        st = f"{self.prefix}{len(self.structs)}"
        if not self.typed and fmt != ">B":
            self.structs[st] = struct.Struct(fmt)
        first = run[0][0] if isinstance(run[0][0], str) else run[0][0][0]
        self.emit(
            f"if pos + {struct.calcsize(fmt)} > limit: raise Truncated({first!r}, {self.partial()})"
        )
        targets = []  # plain integers land in their argument's variable at once
        after = []
        for i, (name, domain) in enumerate(run):
            if domain == "bit":
                targets.append(f"v{i}")
                self.values[f"v{i}"] = None
                for j, bit in enumerate(name):
                    after.append(f"{self.new(bit)} = (v{i} & {1 << j}) != 0")
            elif domain in CONVERT:
                targets.append(f"v{i}")
                self.values[f"v{i}"] = None
                after.append(f"{self.new(name)} = {domain}(v{i})")
            else:
                targets.append(self.new(name))
        if fmt == ">B":
            self.emit(f"{targets[0]} = buf[pos]")
        elif self.typed:
            at = 0
            for target, code in zip(targets, fmt[1:], strict=True):
                width = struct.calcsize(">" + code)
                self.emit(f"{target} = {_big_endian(at, width)}")
                at += width
        else:
            self.emit(f"{', '.join(targets)}, = {st}.unpack_from(buf, pos)")
        self.emit(*after)
        self.emit(f"pos += {struct.calcsize(fmt)}")


def _big_endian(at: int, width: int) -> str:
    """The expression of the big-endian unsigned integer of `width` bytes at `pos + at`."""
    reads = []
    for i in range(width):
        where = f"buf[pos + {at + i}]" if at + i else "buf[pos]"
        shift = 8 * (width - 1 - i)
        reads.append(f"{where} << {shift}" if shift else where)
    return " | ".join(reads)


def generate(arguments: tuple[tuple[str, str], ...]) -> tuple[Callable, str]:
    """The decoder of `arguments` ((name, domain) in wire order) and its source."""
    source, structs = write(arguments)
    namespace: dict[str, Any] = {
        "U32": U32,
        "Truncated": Truncated,
        "Malformed": Malformed,
        "read_table": read_table,
        "skip_table": skip_table,
        **CONVERT,
        **structs,
    }
    exec(compile(source, "<amqp091 arguments>", "exec"), namespace)  # our own generated code
    return namespace["decode"], source


def write(
    arguments: tuple[tuple[str, str], ...],
    name: str = "decode",
    prefix: str = "S",
    typed: bool = False,
) -> tuple[str, dict[str, struct.Struct]]:
    """The source of the decoder of `arguments`, and the structs it uses by name."""
    writer = _Writer(name, prefix, typed)
    run: list[tuple[Any, str]] = []
    for name, domain in arguments:
        if domain == "bit":
            if run and run[-1][1] == "bit" and len(run[-1][0]) < 8:
                run[-1] = ((*run[-1][0], name), "bit")
            else:
                run.append(((name,), "bit"))
            continue
        if domain in FIXED:
            run.append((name, domain))
            continue
        if run:
            writer.fixed(run)
            run = []
        if domain == "table":
            writer.table(name)
        else:
            writer.string(name, 1 if domain == "shortstr" else 4)
    if run:
        writer.fixed(run)
    writer.emit(f"return {writer.partial()}, pos")
    if typed and writer.values:
        writer.lines[1:1] = [
            f"    {var}: {'int' if var.startswith('v') else 'Any'}" for var in writer.values
        ]
    return "\n".join(writer.lines) + "\n", writer.structs


#: the head of the module every decoder is written out to (`module_source`) for mypyc to compile
MODULE_HEADER: Final = '''"""Every AMQP 0-9-1 and 0-8 method's argument decoder, as written by
`arguments.write`.

GENERATED by `arguments.write_module()` from the spec tables; do not edit by hand
(tests/test_argdecoders.py checks it is current). The compiled build (mypyc) compiles these,
typed; the pure build generates the same code when a method is first seen (`CompiledMethods`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from amqpscope.codec.amqp091.arguments import Truncated, skip_table
from amqpscope.codec.amqp091.fieldtable import Malformed, read_table, timestamp

'''


def module_source() -> str:
    """The text of argdecoders.py: one typed decoder per distinct argument list of the 0-9-1 and 0-8
    tables, and `DECODERS`, the argument list -> its decoder."""
    from amqpscope.codec.amqp091 import spec, spec08

    names: dict[tuple[tuple[str, str], ...], str] = {}
    structs: list[str] = []
    functions: list[str] = []
    for table in (spec.METHODS, spec08.METHODS):
        for method in table.values():
            if method.arguments in names:
                continue
            name = names[method.arguments] = f"m{len(names)}"
            source, made = write(method.arguments, name, f"M{len(names) - 1}S", typed=True)
            structs += [f"{key}: Final = struct.Struct({st.format!r})" for key, st in made.items()]
            functions.append(source)
    entries = "".join(f"    {arguments!r}: {name},\n" for arguments, name in names.items())
    return (
        MODULE_HEADER
        + "".join(f"{line}\n" for line in structs)  # none: typed, integers are read bytewise
        + "\n\n"
        + "\n\n".join(functions)
        + "\n\n#: argument list -> its decoder\n"
        + "DECODERS: Final[dict[tuple[tuple[str, str], ...], Callable]] = {\n"
        + entries
        + "}\n"
    )


def write_module() -> None:
    """Write argdecoders.py again (after the spec tables or the generator changed)."""
    Path(__file__).with_name("argdecoders.py").write_text(module_source())


@functools.cache
def precompiled() -> dict[tuple[tuple[str, str], ...], Callable]:
    """The written-out decoders by argument list, in the compiled build only (there they are C,
    several times faster than the generated code run by the interpreter); the pure build
    generates the same code as it needs it (importing all of it would cost startup)."""
    import amqpscope

    if amqpscope.build() != "compiled":
        return {}
    from amqpscope.codec.amqp091 import argdecoders

    return argdecoders.DECODERS


class MethodArguments:
    """A method's name, its generated decoder and the decoder's source. A plain class, not a
    NamedTuple: compiled, `decode` is then a direct C call."""

    __slots__ = ("content", "name", "replies", "run", "source")

    def __init__(self, name: str, run: Callable, source: str, content: bool = False) -> None:
        self.name = name
        # typed: compiled, what it returns is unpacked natively, not by iterating a tuple
        self.run: Run = run
        self.source = source
        self.content = content  # a content method: a message follows (the table's flag)
        self.replies = False  # it has a reply-code (the decoder names the code)

    def decode(self, buf: bytes, pos: int, limit: int) -> tuple[dict[str, Any], list]:
        """Arguments from `pos` to `limit` in `buf`: (fields, [(finding code, message)])."""
        problems: list[tuple[str, str]] = []
        try:
            out, pos = self.run(buf, pos, limit, problems)
        except Truncated as exc:
            name, out = exc.args
            problems.append((BAD_ARGUMENTS, f"{self.name}: {name} runs past the end of the frame"))
            return out, problems
        if 0 <= pos < limit:
            problems.append((TRAILING, f"{self.name}: {limit - pos} bytes after the last argument"))
        return out, problems


class CompiledMethods:
    """(class id, method id) -> compiled arguments, for every method of a spec table; each
    method's decoder is generated when its first frame asks for it (generating all 66 at import
    cost 8 ms of every run's startup, and a capture uses a dozen)."""

    __slots__ = ("by_name", "compiled", "ids", "methods")

    def __init__(self, methods: dict) -> None:
        self.methods = methods
        self.compiled: dict[Any, MethodArguments] = {}
        # a frame is named from the same table: its name finds its decoder without its ids
        self.ids: dict[str, Any] = {method.name: ids for ids, method in methods.items()}
        self.by_name: dict[str, MethodArguments] = {}

    def get(self, ids: Any) -> MethodArguments | None:
        compiled = self.compiled.get(ids)
        if compiled is None:
            method = self.methods.get(ids)
            if method is None:
                return None
            decode = precompiled().get(method.arguments)
            if decode is None:
                decode, source = generate(method.arguments)
            else:
                source = write(method.arguments)[0]
            compiled = MethodArguments(method.name, decode, source, bool(method.content))
            compiled.replies = any(name == "reply-code" for name, _ in method.arguments)
            self.compiled[ids] = compiled
        return compiled

    def named(self, name: str) -> MethodArguments | None:
        """The decoder of the method the table names `name` (None for a name it has not)."""
        compiled = self.by_name.get(name)
        if compiled is None:
            ids = self.ids.get(name)
            if ids is None:
                return None
            compiled = self.get(ids)
            if compiled is not None:
                self.by_name[name] = compiled
        return compiled

    def __getitem__(self, ids: Any) -> MethodArguments:
        compiled = self.get(ids)
        if compiled is None:
            raise KeyError(ids)
        return compiled

    def __contains__(self, ids: Any) -> bool:
        return ids in self.methods


def compile_methods(methods: dict) -> CompiledMethods:
    """(class id, method id) -> compiled arguments, for every method of a spec table."""
    return CompiledMethods(methods)
