"""How AMQP 1.0 values become JSON: the conversions `types.py` applies while it decodes.

The mapping is a contract (docs/amqp10-json.md): tools filter on it, so it is stable. JSON has no
room for AMQP's type names, so the mapping is for reading and filtering, not for round trips:
integers stay numbers, binary becomes hex, timestamps ISO 8601 text, decimals and uuids strings.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any, Final

from amqpscope.codec.tree import REDACTED  # noqa: F401  (its users import it from here)

#: what a secret (a password, a token) reads as unless --show-secrets is given

_F32: Final = struct.Struct(">f")


def timestamp(ms: int) -> str:
    """Milliseconds since the Unix epoch as ISO 8601 UTC with milliseconds,
    `2024-05-01T12:00:00.123Z`. Integer arithmetic (proleptic Gregorian calendar, after Howard
    Hinnant's `civil_from_days`) so that every 64-bit value has an answer; years outside 0..9999
    use ISO 8601's expanded form with a sign (`+292278994-08-17T07:12:55.807Z`)."""
    secs, milli = divmod(ms, 1000)
    days, rem = divmod(secs, 86400)
    hour, rem = divmod(rem, 3600)
    minute, sec = divmod(rem, 60)
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    ytext = f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):06d}"
    return f"{ytext}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{sec:02d}.{milli:03d}Z"


def special_float(value: float) -> str:
    """NaN and the infinities, which JSON cannot carry as numbers."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def double(value: float) -> float | str:
    return value if math.isfinite(value) else special_float(value)


def float32(raw: bytes | memoryview, value: float) -> float | str:
    """A float32 as the shortest decimal that reads back as the same float32 (0.1, not
    0.10000000149011612)."""
    if not math.isfinite(value):
        return special_float(value)
    want = bytes(raw)
    for digits in range(6, 10):
        short = float(f"{value:.{digits}g}")
        try:
            if _F32.pack(short) == want:
                return short
        except OverflowError:  # rounded past the largest float32
            continue
    return value


#: IEEE 754-2008 decimal formats in the Binary Integer Decimal encoding (AMQP 1.0, 1.6.16-18):
#: total bits -> (exponent continuation bits w, trailing coefficient bits t, bias, precision)
_BID: Final = {32: (6, 20, 101, 7), 64: (8, 50, 398, 16), 128: (12, 110, 6176, 34)}


def decimal(bits: int, width: int) -> str:
    """The exact value of a BID-encoded decimal32/64/128 (`bits` as an unsigned integer of
    `width` bits), as Python's `Decimal` prints it: `1.5`, `-0E-101`, `1.23E+10`, `NaN`."""
    w, t, bias, precision = _BID[width]
    sign = bits >> (width - 1)
    comb = (bits >> t) & ((1 << (w + 5)) - 1)  # the combination field, w + 5 bits
    trailing = bits & ((1 << t) - 1)
    top2 = comb >> (w + 3)
    if top2 == 0b11:
        top5 = comb >> w
        if top5 == 0b11110:
            return "-Infinity" if sign else "Infinity"
        if top5 == 0b11111:
            signalling = (comb >> (w - 1)) & 1
            return ("-" if sign else "") + ("sNaN" if signalling else "NaN")
        exponent = (comb >> 1) & ((1 << (w + 2)) - 1)
        coefficient = ((0b1000 | (comb & 1)) << t) | trailing
    else:
        exponent = comb >> 3
        coefficient = ((comb & 0b111) << t) | trailing
    if coefficient >= 10**precision:  # non-canonical: the standard reads it as zero
        coefficient = 0
    digits = tuple(int(d) for d in str(coefficient))
    from decimal import Decimal  # here: rarely needed, and 1 ms of every startup

    return str(Decimal((sign, digits, exponent - bias)))


def uuid(raw: bytes | memoryview) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def map_key(key: Any) -> str:
    """A map key as a JSON object key: strings and symbols as they are, anything else as its
    JSON text (`5`, `true`, `null`, `["a",1]`)."""
    if type(key) is str:
        return key
    return json.dumps(key, separators=(",", ":"), ensure_ascii=False)


def descriptor(value: Any) -> str:
    """A descriptor as the spec writes it: a symbol as itself, a numeric code as
    `0xDOMAIN:0xID` (`0x00000000:0x00000010`)."""
    if type(value) is int:
        return f"0x{value >> 32:08x}:0x{value & 0xFFFFFFFF:08x}"
    return value if type(value) is str else map_key(value)
