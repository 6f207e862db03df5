"""Scalar helpers both backends compile from the same source: ``kernels.cpu`` with
``numba.njit``, ``kernels.cuda`` as CUDA device functions. Plain Python, no decorators."""


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


def utf8_start(b):
    """(code point bits a UTF-8 lead byte carries, continuation bytes after it); the
    count is -1 for a byte that cannot lead (a continuation byte)."""
    if b < 0x80:
        return b, 0
    if b >= 0xF0:
        return b & 0x07, 3
    if b >= 0xE0:
        return b & 0x0F, 2
    if b >= 0xC0:
        return b & 0x1F, 1
    return b, -1
