"""One spelling per C base type, whichever way it was written (``unsigned`` ==
``unsigned int``; GCC's ``long unsigned int`` == ``unsigned long``), so both front-ends
give the same C type names."""

_INTS = {"char", "short", "int", "long", "signed", "unsigned"}
_SAME = {
    "__int128_t": "__int128",
    "signed __int128": "__int128",
    "__int128 signed": "__int128",
    "__uint128_t": "unsigned __int128",
    "__int128 unsigned": "unsigned __int128",
    "__float128": "_Float128",
    "complex float": "float _Complex",
    "_Complex float": "float _Complex",
    "complex double": "double _Complex",
    "_Complex double": "double _Complex",
    "complex long double": "long double _Complex",
    "_Complex long double": "long double _Complex",
    "long _Complex double": "long double _Complex",
    "double long": "long double",
}


def canonical(spelled):
    """``"long unsigned int"`` -> ``"unsigned long"``; names it does not know stay as they are."""
    words = spelled.split() if isinstance(spelled, str) else list(spelled)
    words = [w for w in words if w not in ("const", "volatile", "__const", "__volatile__", "restrict")]
    joined = " ".join(words)
    if joined in _SAME:
        return _SAME[joined]
    if not words or not set(words) <= _INTS:
        return joined
    unsigned = "unsigned" in words
    if "char" in words:
        return "unsigned char" if unsigned else ("signed char" if "signed" in words else "char")
    longs = words.count("long")
    base = "short" if "short" in words else {0: "int", 1: "long"}.get(longs, "long long")
    return f"unsigned {base}" if unsigned else base
