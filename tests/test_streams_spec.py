"""The record-stream description language: the TOML loader and the Python objects are
checked when built, and every mistake is a LayoutError naming the key and the fix."""

import pytest

import layouts as lo

S = lo.Stream

GOOD = """
name = "ticks"
[[section]]
framing = { length = { offset = 0, size = 2, order = "big" } }
tag = { offset = 0, size = 1 }
[section.types.quote]
tag = "Q"
fields = [["kind", "S1"], ["px", ">u4"]]
[section.types.trade]
tag = 84
fields = [["kind", "S1"], ["px", ">u4"], ["qty", ">u6"]]
text = ["kind"]
decimals = { px = 4 }
"""


def _load(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return lo.Stream.load(p)


def test_good_description_loads_and_is_a_value(tmp_path):
    s = _load(tmp_path, GOOD)
    assert s.name == "ticks" and s.sections[0].framing.prefix == 2
    assert [t.name for t in s.sections[0].types] == ["quote", "trade"]
    assert s == _load(tmp_path, GOOD, "again.toml") and hash(s) == hash(_load(tmp_path, GOOD, "again.toml"))
    raw = b"\x00\x05Q\x00\x00\x00\x01" + b"\x00\x0bT\x00\x00\x00\x02\x00\x00\x00\x00\x00\x07"
    t = lo.read_stream(raw, str(tmp_path / "s.toml"))
    assert t["trade"].to_arrow().to_pylist() == [{"_offset": 7, "kind": "T", "px": 2, "qty": 7}]
    assert t.decimals == {"trade": {"px": 4}}


def test_builtins_load():
    assert {"pcap", "itch50"} <= set(lo._stream.builtin_names())
    for name in lo._stream.builtin_names():
        assert lo.Stream.builtin(name).name == name
    with pytest.raises(lo.LayoutError, match=r"no built-in stream 'nope'; built-ins are (\w+, )*itch50, (\w+, )*pcap"):
        lo.read_stream(b"", "nope")
    with pytest.raises(lo.LayoutError, match=r"spec must be a Stream, a path to a .toml description or a built-in"):
        lo.read_stream(b"", 3)


BAD = [
    ("name = 1\nzz = 2\n", r"s.toml: unknown key 'zz'; the keys here are about, byteorder, header"),
    ("", r"s.toml: missing \[\[section\]\]"),
    ("[[section]]\n", r"section\[0\]: missing framing"),
    ("[[section]]\nframing = 'vb'\n", r"section\[0\].framing: 'vb' is no preset; presets are rdw, bdw"),
    ("[[section]]\nframing = { size = 4 }\n", r"section\[0\]: missing \[section.types.NAME\]"),
    (
        "[[section]]\nframing = { size = 4, length = { size = 2 } }\n[section.types.a]\nfields = [['x', '>u4']]\n",
        r"section\[0\].framing: give either size \(fixed-size records\) or length",
    ),
    (
        "[[section]]\nframing = { length = { size = 2, unit = 'dwords' } }\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"framing.length.unit: 'dwords'; expected \"bytes\", \"words\"",
    ),
    (
        "[[section]]\nframing = { length = { size = 9 } }\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"section\[0\].framing.length: needs offset >= 0, size 1..8",
    ),
    (
        "[[section]]\nframing = { length = { size = 2, counts_itself = 'yes' } }\n[section.types.a]\n"
        "fields = [['x', 'u1']]\n",
        r"framing.length.counts_itself: 'yes'; expected true or false",
    ),
    (
        "[[section]]\nframing = { size = 'n + 1' }\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"framing.size: 'n \+ 1' names 'n', which is no integer field of the header \(integer header fields: none",
    ),
    (
        "[header]\nfields = [['sig', 'S4'], ['n', '<u4']]\n[[section]]\noffset = 'sig'\nframing = { size = 1 }\n"
        "[section.types.a]\nfields = [['x', 'u1']]\n",
        r"'sig' names 'sig', which is no integer field of the header "
        r"\(integer header fields: n\)",
    ),
    (
        "[header]\nfields = [['n', '<u4']]\n[[section]]\nframing = { size = 'n ** 2' }\n[section.types.a]\n"
        "fields = [['x', 'u1']]\n",
        r"'n \*\* 2' uses Pow; expressions have header field names, integers, \+ - \* //",
    ),
    (
        "[header]\nfields = [['n', '<u4']]\n[[section]]\noffset = 'n +'\nframing = { size = 1 }\n[section.types.a]\n"
        "fields = [['x', 'u1']]\n",
        r"section\[0\].offset: 'n \+' is not an expression",
    ),
    (
        "[header]\nfields = [['n', '<u4']]\n[[section]]\ncount = 'len(n)'\nframing = { size = 1 }\n[section.types.a]\n"
        "fields = [['x', 'u1']]\n",
        r"'len\(n\)' uses Call",
    ),
    (
        "[[section]]\ncount = -1\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"section\[0\].count: -1 is negative",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u12']]\n",
        r"fields.x: 'u12': no u12; integers are 1, 2, 4, 8 bytes",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'int']]\n",
        r"fields.x: field type 'int' is not one of",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u4']]\n",
        r"'u4': a 4-byte number needs a byte order",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u6']]\n",
        r"'u6': an odd-width integer needs a byte order",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', '>i3']]\n",
        r"'>i3': no i3; integers are 1, 2, 4, 8 bytes \(unsigned also 3, 5, 6, 7\)",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1'], ['x', 'u1']]\n",
        r"field 'x' appears twice",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['_offset', 'u1']]\n",
        r"field name '_offset' is reserved",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x']]\n",
        r"field \('x',\) is not a \[name, type\] pair",
    ),
    ("[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = []\n", r"a record needs at least one field"),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [5]\n",
        r"field \(5,\) is not a \[name, type\] pair",
    ),
    (
        "[byteorder]\nmagic = 5\n[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"byteorder.magic: 5; expected a list of numbers",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1']]\ntext = ['x']\n",
        r"text names 'x', which is no S<n> field",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'S1']]\ndecimals = { x = 2 }\n",
        r"decimals names 'x', which is no integer field",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1']]\ndecimals = { x = 40 }\n",
        r"decimals.x = 40; expected an integer 0..38",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1']]\n[section.types.b]\n"
        "fields = [['x', 'u1']]\n",
        r"2 record types but no tag to tell them apart",
    ),
    (
        "[[section]]\nframing = { size = 1 }\ntag = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"types.a: the section has a tag: give this type its value",
    ),
    (
        "[[section]]\nframing = { size = 1 }\ntag = { size = 1 }\n[section.types.a]\ntag = 'AB'\n"
        "fields = [['x', 'u1']]\n",
        r"tag 'AB' has 2 bytes; the tag field has 1",
    ),
    (
        "[[section]]\nframing = { size = 1 }\ntag = { size = 1 }\n[section.types.a]\ntag = '\u20ac'\n"
        "fields = [['x', 'u1']]\n",
        r"tag '\u20ac' is not one byte per character \(latin-1\); give its value as an "
        r"integer",
    ),
    (
        "[[section]]\nframing = { size = 1 }\ntag = { size = 1 }\n[section.types.a]\ntag = 300\n"
        "fields = [['x', 'u1']]\n",
        r"tag 300 is not an integer 0..255",
    ),
    (
        "[[section]]\nframing = { size = 1 }\ntag = { size = 1 }\n[section.types.a]\ntag = 1\nfields = [['x', 'u1']]\n"
        "[section.types.b]\ntag = 1\nfields = [['x', 'u1']]\n",
        r"tag 1 is also 'a''s; each type needs its own",
    ),
    (
        "[[section]]\nframing = { size = 1 }\ntag = { offset = 4, size = 1 }\n[section.types.a]\ntag = 1\n"
        "fields = [['x', 'u1']]\n",
        r"the tag \(bytes 4..5\) lies beyond type 'a''s fields",
    ),
    (
        "[[section]]\nframing = { size = 1 }\ntail = 'keep'\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"section\[0\].tail: 'keep'; expected \"column\" or \"error\"",
    ),
    (
        "[[section]]\nframing = { size = 1 }\nunknown = 'ignore'\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"section\[0\].unknown: 'ignore'; expected \"error\", \"skip\" or \"keep\"",
    ),
    (
        "order = 'middle'\n[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"order: 'middle'; expected \"big\" or \"little\"",
    ),
    (
        "[byteorder]\nsize = 3\n[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1']]\n",
        r"byteorder: needs offset >= 0, size 1/2/4/8 and magic",
    ),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types._header]\nfields = [['x', 'u1']]\n",
        r"the name '_header' is taken",
    ),
    ("[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = 3\n", r"types.a.fields: expected a list"),
    (
        "[[section]]\nframing = { size = 1 }\n[section.types.a]\nfields = [['x', 'u1']]\nsize = 3\n",
        r"types.a: unknown key 'size'",
    ),
    ("[[section]]\nframing = [1]\n[section.types.a]\nfields = [['x', 'u1']]\n", r"framing: expected a table"),
]


@pytest.mark.parametrize("text,match", BAD)
def test_description_errors_name_the_key_and_the_fix(tmp_path, text, match):
    with pytest.raises(lo.LayoutError, match=match):
        _load(tmp_path, text)


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(lo.LayoutError, match=r"s.toml: not valid TOML .*see docs/streams.md"):
        _load(tmp_path, "[[section]\n")
    with pytest.raises(lo.LayoutError, match=r"cannot read the stream description .*nope.toml: No such file"):
        lo.read_stream(b"", str(tmp_path / "nope.toml"))


def test_python_objects_are_checked_too():
    rec = S.Record([("x", "u1")])
    with pytest.raises(lo.LayoutError, match=r"a stream needs at least one section"):
        S([])
    with pytest.raises(lo.LayoutError, match=r"section\[0\]: expected a Section, got str"):
        S(["x"])
    with pytest.raises(lo.LayoutError, match=r"framing.length.unit: 0; expected"):
        S([S.Section(S.Framing(length=S.Length(unit=0)), [S.RecordType("a", rec)])])
    with pytest.raises(lo.LayoutError, match=r"framing.prefix: -1; expected an integer >= 0"):
        S([S.Section(S.Framing(size=1, prefix=-1), [S.RecordType("a", rec)])])
    with pytest.raises(lo.LayoutError, match=r"offset: expected an integer or an expression \(a string\), got 1.5"):
        S([S.Section(S.Framing(size=1), [S.RecordType("a", rec)], offset=1.5)])
    with pytest.raises(lo.LayoutError, match=r"types.a: the name 'a' is taken"):
        S(
            [
                S.Section(S.Framing(size=1), [S.RecordType("a", rec)]),
                S.Section(S.Framing(size=1), [S.RecordType("a", rec)]),
            ]
        )


def test_damaged_descriptions_give_only_layout_errors():
    """Values of the wrong kind anywhere in a description: a LayoutError, never a crash."""
    import copy
    import random
    import sys

    from layouts._stream.spec import from_dict

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    from test_streams import LAS_LIKE, MULTI

    builtin = lo._stream.spec.resources.files("layouts._stream") / "builtin"
    docs = [
        tomllib.loads(t)
        for t in (GOOD, LAS_LIKE, MULTI, (builtin / "pcap.toml").read_text(), (builtin / "itch50.toml").read_text())
    ]
    junk = [None, 5, -1, 2**70, 1.5, "x", "", "a + ", "=u4", [], [1], ["a"], [["a", 5]], {}, {"q": 1}, True]
    rng = random.Random(7)

    def paths(node, at=()):
        yield at
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            yield from paths(v, at + (k,))

    checked = 0
    for _ in range(800):
        doc = copy.deepcopy(rng.choice(docs))
        where = rng.choice([p for p in paths(doc) if p])
        node = doc
        for k in where[:-1]:
            node = node[k]
        node[where[-1]] = rng.choice(junk)
        try:
            from_dict(doc, "fuzz.toml")
        except lo.LayoutError:
            checked += 1
    assert checked > 400


@pytest.mark.parametrize("terms", [300, 1000, 3000])
def test_a_long_expression_is_a_layout_error_not_a_recursion_error(tmp_path, terms):
    """attack5: "1+1+...+1" of 1,000 terms raised RecursionError (when evaluated, or parsed)."""
    spec = tmp_path / "e.toml"
    spec.write_text(
        'name = "e"\n[[section]]\ncount = "' + "+".join(["1"] * terms) + '"\nframing = { size = 1 }\n'
        '[section.types.r]\nfields = [["a", "u1"]]\n'
    )
    with pytest.raises(lo.LayoutError, match=r"section\[0\]\.count: .* at most 200"):
        lo.read_stream(bytes(10), spec)


def test_s0_and_datetime_types_are_told_apart_from_lists(tmp_path):
    """attack6: an S0 field was refused "at offset 8" with no key named, and '>M8[ns]' was
    read as a list whose length is the header field 'ns'."""
    import layouts as lo

    for spec, said in (
        ('"S0"', r"section\[0\]\.types\.r\.fields\.a: 'S0': a string of 0 bytes holds nothing"),
        ('">M8[ns]"', r"section\[0\]\.types\.r\.fields\.a: field type '>M8\[ns\]' is not one of"),
    ):
        (tmp_path / "s.toml").write_text(
            f'[[section]]\nframing = "fixed"\n[section.types.r]\nfields = [["a", {spec}], ["b", "u1"]]\n'
        )
        with pytest.raises(lo.LayoutError, match=said):
            lo.read_stream(b"\0" * 16, str(tmp_path / "s.toml"))
