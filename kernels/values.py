"""Value transforms written once, compiled by both backends from the same source:
:mod:`kernels.cpu` with ``numba.njit``, :mod:`kernels.cuda` as CUDA device functions.

Plain functions without decorators, each calling none of the others (a backend compiles
each one on its own): bit masks and sign extension, NaN tests on raw bits, calendar
arithmetic for time columns, and UTF-8's lead bytes and lengths. How bytes are fetched
differs per device (raw addresses on the CPU, shared-memory words on the GPU); what a
value becomes does not.
"""

from numba import int64


def mask(nbits):
    """The low ``nbits`` bits set (all 64 when nbits >= 64)."""
    if nbits >= 64:
        return int64(-1)
    return ~(int64(-1) << nbits)  # no 2**63 - 1 overflow (the CUDA simulator checks)


def low_bits(v, nbits):
    """The low ``nbits`` of v, zero-extended (all 64 bits when nbits >= 64)."""
    if nbits >= 64:
        return v
    return v & ~(int64(-1) << nbits)


def sign_extend(v, nbits):
    """Read the low ``nbits`` of v as a two's complement number."""
    if nbits >= 64:
        return v
    v = v & ~(int64(-1) << nbits)
    if (v >> (nbits - 1)) & 1:
        v |= int64(-1) << nbits
    return v


def is_nan(bits, width):
    """Whether the raw bits of a float of ``width`` bytes (8, 4, else 2) are a NaN."""
    if width == 8:
        e, m = int64(0x7FF0000000000000), int64(0x000FFFFFFFFFFFFF)
    elif width == 4:
        e, m = int64(0x7F800000), int64(0x007FFFFF)
    else:
        e, m = int64(0x7C00), int64(0x03FF)
    return (bits & e) == e and (bits & m) != 0


def utf8_length(cp):
    """Bytes of the UTF-8 encoding of a code point; 0 if it has none (a surrogate, or
    beyond U+10FFFF)."""
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return 0 if 0xD800 <= cp <= 0xDFFF else 3
    return 4 if cp <= 0x10FFFF else 0


def days_from_civil(y, m, d):
    """Days since 1970-01-01 of a proleptic Gregorian date."""
    if m <= 2:
        y -= 1
    era = y // 400
    yoe = y - era * 400
    mm = m - 3 if m > 2 else m + 9
    doy = (153 * mm + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z):
    """(year, month, day) of a count of days since 1970-01-01."""
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    y = yoe + era * 400
    if m <= 2:
        y += 1
    return y, m, d


def utf8_lead(b):
    """For a byte b >= 0x80 starting a UTF-8 sequence: (continuation bytes, lowest and
    highest allowed second byte); continuation bytes -1 if b cannot start one."""
    if 0xC2 <= b <= 0xDF:
        return 1, 0x80, 0xBF
    if 0xE0 <= b <= 0xEF:
        return 2, (0xA0 if b == 0xE0 else 0x80), (0x9F if b == 0xED else 0xBF)
    if 0xF0 <= b <= 0xF4:
        return 3, (0x90 if b == 0xF0 else 0x80), (0x8F if b == 0xF4 else 0xBF)
    return -1, 0, 0


def utf8_whole(cp, need):
    """Whether code point ``cp``, read from a lead byte and ``need`` continuation bytes, is
    one UTF-8 allows: in its shortest form (not C0 81 for "A"), not a surrogate
    (U+D800-U+DFFF), at most U+10FFFF."""
    if need == 1:
        return cp >= 0x80
    if need == 2:
        return cp >= 0x800 and (cp < 0xD800 or cp > 0xDFFF)
    if need == 3:
        return 0x10000 <= cp <= 0x10FFFF
    return True


def utf8_start(b):
    """(code point bits a UTF-8 lead byte carries, continuation bytes after it); the
    count is -1 for a byte that cannot lead (a continuation byte)."""
    if b < 0x80:
        return b, 0
    if b >= 0xF8:
        return b, -1
    if b >= 0xF0:
        return b & 0x07, 3
    if b >= 0xE0:
        return b & 0x0F, 2
    if b >= 0xC0:
        return b & 0x1F, 1
    return b, -1
