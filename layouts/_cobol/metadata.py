"""The copybook's 88 levels of items that are no leaf column (the 01 record, groups,
FILLERs) as Arrow schema metadata: ``cobol.88.groups`` on the schema, and each group's
also as ``cobol.88`` on its struct column. Both the Layout's own schema
(``Layout.from_copybook``) and ``layouts.cobol.with_group_conditions`` write them here."""

import json

import pyarrow as pa

GROUP_CONDITIONS = "cobol.88.groups"  # the schema metadata key


def group_rows(group_conditions) -> list:
    """``Copybook.group_conditions`` as JSON-ready dicts (item, path, line, offset, size,
    conditions): the ``cobol.88.groups`` metadata, and ``layouts inspect --json``'s."""
    return [
        {
            "item": name,
            "path": ".".join(path),
            "line": line,
            "offset": offset,
            "size": size,
            "conditions": {n: list(v) for n, v in conditions},
        }
        for path, name, line, offset, size, conditions in group_conditions
    ]


def with_groups(schema: pa.Schema, rows_json: str) -> pa.Schema:
    """``schema`` with the groups' 88 levels of ``rows_json`` (:func:`group_rows`' list as
    JSON text) in its metadata, and each group's on its struct column where the schema has
    one (nested, not flattened; inside an OCCURS list, on the list's struct item)."""
    rows = json.loads(rows_json)
    structs = {row["path"]: json.dumps(row["conditions"]) for row in rows if row["path"]}

    def mark(field, name):
        meta = dict(field.metadata or {})
        if name in structs and pa.types.is_struct(field.type):
            meta[b"cobol.88"] = structs[name].encode()
        kind = field.type
        if pa.types.is_struct(kind):
            kind = pa.struct([mark(kind.field(i), f"{name}.{kind.field(i).name}") for i in range(kind.num_fields)])
        elif pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind):
            inner = mark(kind.value_field, name)
            kind = pa.list_(inner, kind.list_size) if pa.types.is_fixed_size_list(kind) else pa.list_(inner)
        return pa.field(field.name, kind, field.nullable, meta or None)

    return pa.schema(
        [mark(f, f.name) for f in schema],
        metadata={**(schema.metadata or {}), GROUP_CONDITIONS.encode(): rows_json.encode()},
    )
