"""The copy plan: one row of int64 per leaf column, read by every backend.

A plan is an ``int64`` array of shape ``(n_ops, NCOLS)`` plus an ``int64`` table of
element offsets. Row ``j`` describes how leaf column ``j`` moves between a record and
its Arrow buffers. Addresses are plain integers: the host keeps the owners alive.

Columns of a row
----------------
KIND      one of the ``K_*`` codes below.
WIDTH     bytes of one element inside the record (``n`` for ``S<n>``, ``4n`` for ``U<n>``).
SWAP      1 if the record holds the element in non-native byte order.
COUNT     elements per record (the product of enclosing sub-array shapes).
OFFS      index into the offsets table where COUNT byte offsets (within the record) start.
DATA      address of the column's values (or of the var-length data for strings).
VALID     address of the validity bitmap, 0 if the column has none.
OFFSETS   address of the var-length offsets, 0 for fixed-width columns.
NULLS     ``N_NONE``, ``N_BITS`` (null where the raw bits equal SENT) or ``N_NAN``.
SENT      the sentinel (AoS -> SoA) or fill value (SoA -> AoS), as native raw bits.
P1        kind parameter: scale factor (K_SCALE, K_CIVIL); max bytes per value (K_CSTR,
          K_UTF32); shift of the bit-field in its container word, once loaded in
          native order (K_BITS); first value of a dense K_ENUM table.
P2        kind parameter: bytes of one Arrow value (K_SCALE); offset width 4/8 (strings);
          bits of the bit-field (K_BITS); entries in TABLE (K_ENUM).
ELEM0     first element of the Arrow column (its array offset), SoA -> AoS only.
FLAGS     ``F_UTF8`` (check UTF-8), ``F_TRUNCATE`` (cut strings that do not fit),
          ``F_SIGNED`` (the bit-field or enum value is signed).
P3        bytes of one Arrow value for K_BITS (0: bit-packed boolean) and K_ENUM indices.
TABLE     K_ENUM: address of an int64 table. AoS -> SoA: the enumerator values in
          ascending order (dictionary index = position), or with F_DENSE the dictionary
          index (-1: none) of each value from P1 on; SoA -> AoS: the value of each
          dictionary entry.
"""

KIND, WIDTH, SWAP, COUNT, OFFS, DATA, VALID, OFFSETS, NULLS, SENT, P1, P2, ELEM0, FLAGS, P3, TABLE = range(16)
NCOLS = 16

# Kinds of leaf conversion.
K_COPY = 0  # fixed-width 1/2/4/8-byte value, raw bits, optional byte swap
K_BYTES = 1  # n opaque bytes (fixed_size_binary)
K_BOOL = 2  # one byte per value <-> one bit per value
K_SCALE = 3  # int64 count of a time unit <-> count of another unit (times P1), NaT <-> null
K_CIVIL = 4  # datetime64[M] (P1=1) or [Y] (P1=12) <-> date32 days, NaT <-> null
K_CSTR = 5  # S<n> trimmed at the first NUL <-> binary/string
K_UTF32 = 6  # U<n> (UTF-32, trailing NULs dropped) <-> UTF-8 string
K_BITS = 7  # C bit-field: WIDTH-byte container word, shift P1, P2 bits <-> integer/bool column
K_ENUM = 8  # C enum value <-> int32 dictionary index (-1 marks a value with no enumerator)

# How nulls are recognised (AoS -> SoA) or written back (SoA -> AoS).
N_NONE = 0
N_BITS = 1
N_NAN = 2

# Flags.
F_UTF8 = 1
F_TRUNCATE = 2
F_SIGNED = 4
F_DENSE = 8  # K_ENUM, AoS -> SoA: TABLE holds the index of every value P1 .. P1 + P2 - 1

# Error codes a kernel reports as (row, op, code).
E_RANGE = 1  # a value does not fit the destination type
E_INEXACT = 2  # a value is not a whole number of the destination unit
E_UTF = 3  # invalid UTF-8 / UTF-32
E_TOO_LONG = 4  # a string is longer than its fixed-size field
E_NULL = 5  # a null with no fill value
E_NUL = 6  # a NUL byte inside a value bound for a C string (it would end the string there)

NAT = -(2**63)


# Mainframe kinds (issue 27): value transforms in kernels/mainframe.py, ops in kernels/cpu/mainframe.py.
# Their rows: P1 digits (packed, zoned, binary; 0: no digit limit) or most UTF-8 bytes of a value
# (text); P2 bytes of one Arrow value (16 decimal128, 8 int64) or the offset width (text); P3
# the power of ten the digits are multiplied by (PIC 9PP); SENT the zoned '+' | '-' << 8 bytes;
# TABLE the code page's table (text), or the positive sign nibble the way back writes (packed,
# zoned: 0xC or 0xF; 0 for the default, C when signed, F when not).

K_TEXT = 9  # EBCDIC text <-> UTF-8 string through TABLE (decode: uint32[256]; encode: int16[65536])
K_PACKED = 10  # packed decimal (COMP-3) <-> decimal128 (P2 = 16) or int64 (P2 = 8)
K_ZONED = 11  # zoned decimal (DISPLAY) <-> decimal128 / int64
K_BINARY = 12  # big-endian binary integer of WIDTH bytes <-> decimal128 / int64
K_HFLOAT = 13  # IBM hexadecimal float, WIDTH 4 or 8 <-> float32 / float64

# The kinds whose values are variable-length strings: their Arrow offsets are made final
# (compacted) after a threaded or tiled run; one list for every backend.
STRING_KINDS = (K_CSTR, K_UTF32, K_TEXT)

F_NULL_INVALID = 16  # invalid bytes become nulls (the column has a validity bitmap)
F_LEADING = 32  # zoned: the sign is on (or before) the first digit
F_SEPARATE = 64  # zoned: the sign is its own byte, SENT = plus byte | minus byte << 8
F_TRUNC_BIN = 128  # binary: every value of the width is valid (TRUNC(BIN)); else below 10**P1
F_TRIM_RIGHT = 256  # text: trailing EBCDIC spaces dropped
F_TRIM_LEFT = 512  # text: leading EBCDIC spaces dropped
F_ASCII = 1024  # text, zoned: ASCII data (spaces 0x20; zoned bytes through kernels.mainframe.ascii_zoned_byte)

E_INVALID = 7  # bytes that are not a valid value of the field's encoding
# (text, SoA -> AoS: E_RANGE is a character the field's code page has no byte for; codes stay below 8,
# the CUDA fault word's three bits)
