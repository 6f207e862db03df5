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
