#!/usr/bin/env python3
"""Generates kproxy's Kafka codec (C++) from the facts-only schema made by import_schema.py.

Usage:
  generate.py --schema codec/gen/kafka-4.4.0-messages.json --out <build>/generated [--chunks N]
  generate.py --schema ... --out ... --list-outputs      # prints the files it would write

Writes, under <out>/codec/:
  api_keys.h/.cc          ApiKey enum, names, version ranges, header-version table
  error_code.h/.cc        ErrorCode enum and names
  messages.h              includes every per-API header below
  messages/<api>.h        the request and response structs of one API (e.g. messages/metadata.h)
  messages/request_header_data.h, messages/response_header_data.h
  messages_<i>.cc         the method bodies, several APIs per file (compile time on 2 cores)
  message_factory.cc      make_request / make_response
  response_scan.h/.cc     scan_response: a response's error codes and top-level tags, nothing decoded
  testing/fill.h, testing/fill_<i>.cc   smallest and random instances (unit tests only)

Naming (see codec/gen/README.md): a message is a struct named as in Kafka (`MetadataResponse`);
its nested and common structs are declared flat inside it under Kafka's struct names
(`MetadataResponse::MetadataResponseBroker`); members are snake_case of Kafka's field names
(`ThrottleTimeMs` -> `throttle_time_ms`), with `_` appended on a clash with a method or keyword.
The schema is checked strictly: anything this generator does not understand stops it.
"""

import argparse
import json
import os
import re
import sys

SCALARS = {
    # type: (C++ type, fixed size, reader call, writer call, fill call)
    "int8": ("int8_t", 1, "r.int8()", "w.int8", "f.i8()"),
    "int16": ("int16_t", 2, "r.int16()", "w.int16", "f.i16()"),
    "int32": ("int32_t", 4, "r.int32()", "w.int32", "f.i32()"),
    "int64": ("int64_t", 8, "r.int64()", "w.int64", "f.i64()"),
    "uint16": ("uint16_t", 2, "r.uint16()", "w.uint16", "f.u16()"),
    "uint32": ("uint32_t", 4, "r.uint32()", "w.uint32", "f.u32()"),
    "float64": ("double", 8, "r.float64()", "w.float64", "f.f64()"),
    "bool": ("bool", 1, "r.boolean()", "w.boolean", "f.boolean()"),
    "uuid": ("Uuid", 16, "r.uuid()", "w.uuid", "f.uuid()"),
}
# Arrays of these are read and written as one block (Reader/Writer::fixed_array).
FIXED_WIDTH_ARRAY_BASES = ("int16", "int32", "int64")

INT_RANGES = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
              "int64": (-2**63, 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1)}
VARIABLE = {"string", "bytes", "records"}
ENTITY_KINDS = {"topicName": "kTopicName", "transactionalId": "kTransactionalId",
                "producerId": "kProducerId", "groupId": "kGroupId"}
CPP_KEYWORDS = set("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
char16_t char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern false
float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr operator or
or_eq private protected public register reinterpret_cast requires return short signed sizeof static
static_assert static_cast struct switch template this thread_local throw true try typedef typeid typename
union unsigned using virtual void volatile wchar_t while xor xor_eq""".split())
# Member names that would clash with the methods of generated structs or Message.
# Every generated struct has these methods and parameters; locals in generated code end in `_`.
RESERVED_MEMBERS = {"read", "write", "size", "to_json", "is_default", "visit_errors", "visit_entities", "unsupported_field",
                    "unknown_tagged_fields", "version", "r", "w", "f", "n", "x", "visit", "scope", "out"}
# Top-level messages also implement Message.
RESERVED_TOP_MEMBERS = RESERVED_MEMBERS | {"api_key", "is_request", "name", "for_each_error_code", "for_each_entity",
                                           "throttle_time"}
RESERVED_TYPES = {"Message", "Reader", "Writer", "Bytes", "Uuid", "ErrorScope", "UnknownTaggedField",
                  "UnknownTaggedFields", "ErrorCodeVisitor", "EntityVisitor", "EntityKind", "Filler"}
PARTITION_NAMES = {"PartitionIndex", "Partition", "PartitionId", "Index"}  # Index: Produce, FetchSnapshot
PARTITION_LIST_NAMES = {"Partitions", "PartitionIndexes", "PartitionIds"}


class GenError(Exception):
    pass


def fail(where, what):
    raise GenError(f"{where}: {what}")


# ---------------------------------------------------------------------------------------------
# Version ranges

INF = 0x7fff


def parse_versions(where, s):
    if s is None:
        return None
    if not isinstance(s, str):
        fail(where, f"version range {s!r} is not a string")
    if s == "none":
        return (1, 0)  # empty
    m = re.match(r"^(\d+)(\+|-(\d+))?$", s)
    if not m:
        fail(where, f"bad version range {s!r}")
    lo = int(m.group(1))
    if m.group(2) == "+":
        return (lo, INF)
    if m.group(3) is not None:
        hi = int(m.group(3))
        if hi < lo:
            fail(where, f"bad version range {s!r}")
        return (lo, hi)
    return (lo, lo)


def intersect(a, b):
    return (max(a[0], b[0]), min(a[1], b[1]))


def empty(r):
    return r[0] > r[1]


def cond(r, valid):
    """C++ condition for `version` in r, given that version is known to be in `valid`."""
    r = intersect(r, valid)
    if empty(r):
        return "false"
    parts = []
    if r[0] > valid[0]:
        parts.append(f"version >= {r[0]}")
    if r[1] < valid[1]:
        parts.append(f"version <= {r[1]}")
    if not parts:
        return "true"
    if r[0] == r[1] and len(parts) == 2:
        return f"version == {r[0]}"
    return " && ".join(parts)


def when(c, body_lines, indent):
    """Wraps lines in `if (c) { ... }` unless c is constant."""
    if c == "false":
        return []
    if c == "true":
        return [indent + l for l in body_lines]
    return [f"{indent}if ({c}) {{"] + [indent + "  " + l for l in body_lines] + [f"{indent}}}"]


# ---------------------------------------------------------------------------------------------
# Names

def snake(name):
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def member_name(name, top):
    s = snake(name)
    if s in CPP_KEYWORDS or s in (RESERVED_TOP_MEMBERS if top else RESERVED_MEMBERS):
        s += "_"
    return s


def api_base_name(msg_name):
    for suffix in ("Request", "Response"):
        if msg_name.endswith(suffix):
            return msg_name[: -len(suffix)]
    raise GenError(f"{msg_name}: request/response name without the Request/Response suffix")


def upper_to_camel(name):
    return "".join(p.capitalize() for p in name.lower().split("_"))


def cpp_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------------------
# Model

class Field:
    def __init__(self, msg, owner, spec, valid, top):
        self.msg = msg
        self.owner = owner  # struct name
        where = f"{msg.name}.{owner}.{spec.get('name')}"
        self.where = where
        self.name = spec["name"]
        self.member = member_name(self.name, top)
        self.type = spec["type"]
        self.versions = intersect(parse_versions(where, spec["versions"]), valid)
        self.nullable = parse_versions(where, spec.get("nullableVersions")) or (1, 0)
        self.nullable_any = "nullableVersions" in spec and not empty(intersect(self.nullable, self.versions))
        self.tagged = "tag" in spec
        self.tag = spec.get("tag")
        self.tagged_versions = parse_versions(where, spec.get("taggedVersions")) if self.tagged else None
        if self.tagged and self.tagged_versions != parse_versions(where, spec["versions"]):
            fail(where, "taggedVersions differ from versions (not supported)")
        self.flexible_override = spec.get("flexibleVersions")
        if self.flexible_override not in (None, "none"):
            fail(where, f"flexibleVersions override {self.flexible_override!r} (only \"none\" is supported)")
        self.entity = spec.get("entityType")
        self.default_raw = spec.get("default")
        self.ignorable = spec.get("ignorable", False)
        self.is_array = self.type.startswith("[]")
        self.base = self.type[2:] if self.is_array else self.type
        self.is_struct = self.base not in SCALARS and self.base not in VARIABLE
        if self.is_struct:
            if not re.match(r"^[A-Z][A-Za-z0-9]*$", self.base):
                fail(where, f"unknown type {self.type!r}")
            if self.base in RESERVED_TYPES or self.base == msg.name:
                fail(where, f"struct name {self.base!r} clashes with a kproxy name")
        elif "fields" in spec:
            fail(where, "nested fields on a non-struct type")
        if self.is_array and self.base in ("bytes", "records", "bool", "float64"):
            fail(where, f"arrays of {self.base} are not supported")
        if self.nullable_any and not (self.is_array or self.is_struct or self.base in VARIABLE):
            fail(where, f"nullable {self.type} is not supported")
        if self.base == "records" and self.is_array:
            fail(where, "arrays of records")
        if self.entity is not None and self.entity not in ENTITY_KINDS and self.entity != "brokerId":
            fail(where, f"unknown entityType {self.entity!r}")
        self.check_default()

    # -- types
    def elem_cpp(self):
        if self.is_struct:
            return self.base
        if self.base == "string":
            return "std::string_view"
        if self.base == "bytes":
            return "Bytes"
        return SCALARS[self.base][0]

    def cpp_type(self):
        if self.is_array:
            t = f"std::vector<{self.elem_cpp()}>"
            return f"std::optional<{t}>" if self.nullable_any else t
        if self.base == "records":
            return "std::optional<Bytes>"
        t = self.elem_cpp()
        if self.nullable_any and (self.is_struct or self.base in VARIABLE):
            return f"std::optional<{t}>"
        return t

    def optional(self):
        return self.cpp_type().startswith("std::optional")

    def engage(self, x, prefix=""):
        """`(x = T{})`: sets the std::optional member x to a value-initialized T and yields the
        optional. Not `x.emplace()`: clang 14 evaluates is_constructible<T> for emplace() while the
        enclosing struct is still incomplete and rejects it (g++ 12 accepts both); assignment needs
        only T's move constructor. `prefix` qualifies a nested struct's name outside its enclosing
        struct (the fill functions)."""
        elem = f"{prefix}{self.base}" if self.is_struct else self.elem_cpp()
        t = f"std::vector<{elem}>" if self.is_array else elem
        return f"({x} = {t}{{}})"

    # -- defaults
    def check_default(self):
        d = self.default_raw
        if d is None:
            return
        if d == "null":
            if not self.nullable_any and not (self.base == "records"):
                fail(self.where, "default null on a field that is never nullable")
            return
        if self.is_array or self.is_struct:
            fail(self.where, f"default {d!r} on an array or struct")
        if self.base in INT_RANGES:
            try:
                v = int(d, 16) if d.lower().startswith(("0x", "-0x")) else int(d)
            except ValueError:
                fail(self.where, f"bad integer default {d!r}")
            lo, hi = INT_RANGES[self.base]
            if not lo <= v <= hi:
                fail(self.where, f"default {d!r} out of range for {self.base}")
        elif self.base == "bool":
            if d not in ("true", "false"):
                fail(self.where, f"bad bool default {d!r}")
        elif self.base == "float64":
            try:
                float(d)
            except ValueError:
                fail(self.where, f"bad float64 default {d!r}")
        elif self.base == "string":
            pass
        elif self.base in ("bytes", "records", "uuid"):
            if d != "":
                fail(self.where, f"default {d!r} not supported on {self.base}")

    def default_expr(self):
        """C++ initializer expression, or None for value-initialised ({} / 0 / false / empty)."""
        d = self.default_raw
        if d is None or d == "null" or d == "":
            return None
        if self.base in INT_RANGES:
            v = int(d, 16) if d.lower().startswith(("0x", "-0x")) else int(d)
            lo, hi = INT_RANGES[self.base]
            ctype = SCALARS[self.base][0]
            if v == lo and v != 0:
                return f"std::numeric_limits<{ctype}>::min()"
            if v == hi:
                return f"std::numeric_limits<{ctype}>::max()"
            if v == 0:
                return None
            return str(v) if self.base != "int64" else f"INT64_C({v})"
        if self.base == "bool":
            return None if d == "false" else "true"
        if self.base == "float64":
            return None if float(d) == 0.0 else repr(float(d))
        if self.base == "string":
            return f"std::string_view{{{cpp_string(d)}}}"
        fail(self.where, f"unsupported default {d!r}")

    def default_is_null(self):
        # Only an explicit "null" default (and records, which Kafka defaults to null) starts as null.
        return self.optional() and (self.default_raw == "null" or self.base == "records")

    def non_default_cond(self, x):
        """C++ boolean: member x differs from its default (used to omit tagged fields)."""
        if self.is_array:
            if self.optional():
                return f"{x}.has_value()" if self.default_is_null() else f"(!{x} || !{x}->empty())"
            return f"!{x}.empty()"
        if self.is_struct:
            if self.optional():
                return f"{x}.has_value()" if self.default_is_null() else f"(!{x} || !{x}->is_default())"
            return f"!{x}.is_default()"
        if self.base in ("string", "bytes", "records"):
            if self.optional():
                if self.default_is_null():
                    return f"{x}.has_value()"
                if self.base == "string" and self.default_expr():
                    return f"(!{x} || *{x} != {self.default_expr()})"
                return f"(!{x} || !{x}->empty())"
            if self.base == "string" and self.default_expr():
                return f"{x} != {self.default_expr()}"
            return f"!{x}.empty()"
        if self.base == "uuid":
            return f"{x} != Uuid{{}}"
        d = self.default_expr()
        if self.base == "bool":
            return f"{x} != {d or 'false'}"
        if self.base == "float64":
            return f"std::bit_cast<uint64_t>({x}) != std::bit_cast<uint64_t>(double{{{d or '0.0'}}})"
        return f"{x} != {d or '0'}"

    # -- roles
    def is_error_code(self):
        return self.base == "int16" and not self.is_array and (self.name == "ErrorCode" or self.name.endswith("ErrorCode"))

    def scope_role(self, struct_name):
        if self.is_array:
            return None
        if self.base == "string":
            if self.entity == "topicName" or self.name in ("Topic", "TopicName") or (
                    self.name == "Name" and "Topic" in struct_name and self.entity in (None, "topicName")):
                return "topic"
            if self.entity == "transactionalId":
                return "transactional_id"
            if self.entity == "groupId":
                return "group_id"
        if self.base == "int32" and self.name in PARTITION_NAMES:
            return "partition"
        if self.base == "uuid" and self.name == "TopicId":
            return "topic_id"
        return None

    def entity_kind(self):
        if self.entity in ENTITY_KINDS:
            kind = ENTITY_KINDS[self.entity]
            if kind == "kProducerId" and self.base not in ("int64",):
                fail(self.where, "producerId entity that is not int64")
            if kind != "kProducerId" and self.base != "string":
                fail(self.where, f"{self.entity} entity that is not a string")
            return kind
        if self.base == "int32" and ((not self.is_array and self.name in PARTITION_NAMES) or
                                     (self.is_array and self.name in PARTITION_LIST_NAMES)):
            return "kPartition"
        # KIP-516: requests that name topics by id (Produce v13+, Fetch v13+, ...) carry "TopicId".
        if self.base == "uuid" and not self.is_array and self.name == "TopicId":
            return "kTopicId"
        return None


class Struct:
    def __init__(self, msg, name, fields_spec, valid, top=False):
        self.msg = msg
        self.name = name
        self.fields = [Field(msg, name, f, valid, top) for f in fields_spec]
        names = [f.member for f in self.fields]
        if len(set(names)) != len(names):
            fail(f"{msg.name}.{name}", "two fields map to the same member name")
        tags = [f.tag for f in self.fields if f.tagged]
        if len(set(tags)) != len(tags):
            fail(f"{msg.name}.{name}", "duplicate tags")
        self.regular = [f for f in self.fields if not f.tagged]
        self.tagged = sorted([f for f in self.fields if f.tagged], key=lambda f: f.tag)
        self.has_errors = False
        self.has_entities = False
        self.needs_is_default = False


class MessageDef:
    def __init__(self, spec):
        self.spec = spec
        self.name = spec["name"]
        self.kind = spec["type"]
        self.api_key = spec.get("apiKey", -1)
        where = self.name
        self.valid = parse_versions(where, spec["validVersions"])
        self.removed = empty(self.valid)
        self.flexible = parse_versions(where, spec.get("flexibleVersions", "none"))
        self.unstable = spec.get("latestVersionUnstable", False)
        self.listeners = spec.get("listeners", [])
        if self.kind == "header":
            self.cpp_name = self.name + "Data"  # RequestHeaderData: codec/request_header.h owns RequestHeader
        else:
            self.cpp_name = self.name
        if self.removed:
            return
        self.structs = {}
        self.order = []
        self.common = {}
        for s in spec.get("commonStructs", []):
            if s["name"] in self.common:
                fail(where, f"common struct {s['name']} defined twice")
            self.common[s["name"]] = s
        self.top = Struct(self, self.cpp_name, spec["fields"], self.valid, top=True)
        self.top.path = ""
        self._collect(self.top, spec["fields"], set())
        self.order.append(self.top)
        unused = set(self.common) - set(self.structs)
        if unused:
            fail(where, f"unused common structs {sorted(unused)}")
        self._analyse()

    def _collect(self, struct, fields_spec, stack):
        for fs, f in zip(fields_spec, struct.fields):
            if not f.is_struct:
                continue
            if "fields" in fs:
                if f.base in self.common:
                    fail(f.where, f"struct {f.base} defined inline and as a common struct")
                sub_spec = fs["fields"]
            elif f.base in self.common:
                sub_spec = self.common[f.base]["fields"]
            else:
                fail(f.where, f"unknown struct type {f.base}")
            if f.base in self.structs:
                if "fields" in fs and self.structs[f.base].spec is not sub_spec:
                    fail(f.where, f"struct {f.base} defined twice")
                continue
            if f.base in stack:
                fail(f.where, f"recursive struct {f.base}")
            sub = Struct(self, f.base, sub_spec, self.valid)
            sub.spec = sub_spec
            self.structs[f.base] = sub
            self._collect(sub, sub_spec, stack | {f.base})
            self.order.append(sub)

    def _analyse(self):
        changed = True
        while changed:
            changed = False
            for s in self.order:
                e = any(f.is_error_code() or (f.is_struct and self.structs[f.base].has_errors) for f in s.fields)
                n = any(f.entity_kind() or (f.is_struct and self.structs[f.base].has_entities) for f in s.fields)
                if e != s.has_errors or n != s.has_entities:
                    s.has_errors, s.has_entities = e, n
                    changed = True
        for s in self.order:
            for f in s.fields:
                if f.is_struct and not f.is_array:
                    self.structs[f.base].needs_is_default = True
        # is_default of a struct needs is_default of its non-array struct members
        changed = True
        while changed:
            changed = False
            for s in self.order:
                if s.needs_is_default:
                    for f in s.fields:
                        if f.is_struct and not f.is_array and not self.structs[f.base].needs_is_default:
                            self.structs[f.base].needs_is_default = True
                            changed = True

    def flexible_cond(self):
        return cond(self.flexible, self.valid)

    def header_name(self):
        if self.kind == "header":
            return snake(self.cpp_name)
        return snake(api_base_name(self.name))


# ---------------------------------------------------------------------------------------------
# Code for one field

class Gen:
    """Emits the statements of one struct's methods."""

    def __init__(self, msg, struct):
        self.msg = msg
        self.s = struct
        self.valid = msg.valid

    def compact(self, f):
        return "false" if f.flexible_override == "none" else "flexible_"

    def path(self, f):
        return f.name if self.s is self.msg.top else f"{self.s.name}.{f.name}"

    # ---- read
    def read_value(self, f, x, flex):
        """Statements reading field f into member x (the field is present)."""
        nv = cond(f.nullable, intersect(f.versions, self.valid)) if f.nullable_any else "false"
        out = []
        if f.is_array:
            out.append("{")
            out.append(f"  const int32_t count_ = r.array_length({flex});")
            if f.optional():
                out.append("  if (count_ < 0) {")
                if nv == "true":
                    out.append(f"    {x}.reset();")
                else:
                    out.append(f"    if ({nv}) {x}.reset(); else r.fail(\"null array in a non-nullable field\");")
                out.append("  } else {")
                out.append(f"    auto& items_ = *{f.engage(x)};")
            else:
                out.append("  if (count_ < 0) {")
                out.append("    r.fail(\"null array in a non-nullable field\");")
                out.append("  } else {")
                out.append(f"    auto& items_ = {x};")
                out.append("    items_.clear();")
            if not f.is_struct and f.base in FIXED_WIDTH_ARRAY_BASES:
                # One bounds check and one allocation for the whole block (partition lists).
                out.append("    r.fixed_array(items_, static_cast<size_t>(count_));")
                out.append("  }")
                out.append("}")
                return out
            out.append("    items_.reserve(reserve_hint(count_));")
            out.append("    for (int32_t i_ = 0; i_ < count_ && r.ok(); ++i_) {")
            if f.is_struct:
                out.append("      items_.emplace_back().read(r, version);")
            elif f.base == "string":
                out.append(f"      items_.push_back(r.string({flex}));")
            else:
                out.append(f"      items_.push_back({SCALARS[f.base][2]});")
            out.append("    }")
            out.append("  }")
            out.append("}")
            return out
        if f.is_struct:
            if f.optional():
                if nv == "true":
                    out.append(f"if (r.int8() < 0) {x}.reset(); else {f.engage(x)}->read(r, version);")
                else:
                    out.append(f"if (!({nv})) {f.engage(x)}->read(r, version);")
                    out.append(f"else if (r.int8() < 0) {x}.reset();")
                    out.append(f"else {f.engage(x)}->read(r, version);")
            else:
                out.append(f"{x}.read(r, version);")
            return out
        if f.base == "records":
            out.append(f"{x} = r.nullable_bytes({flex});")
            return out
        if f.base in ("string", "bytes"):
            fn = "string" if f.base == "string" else "bytes"
            if f.optional():
                if nv == "true":
                    out.append(f"{x} = r.nullable_{fn}({flex});")
                else:
                    out.append(f"if ({nv}) {x} = r.nullable_{fn}({flex}); else {x} = r.{fn}({flex});")
            else:
                out.append(f"{x} = r.{fn}({flex});")
            return out
        out.append(f"{x} = {SCALARS[f.base][2]};")
        return out

    # ---- write
    def write_value(self, f, x, flex):
        nv = cond(f.nullable, intersect(f.versions, self.valid)) if f.nullable_any else "false"
        out = []
        if f.is_array:
            elem = self.write_elem(f, flex)
            if f.optional():
                out.append(f"if (!{x}) {{")
                out.append(f"  w.array_length({'-1' if nv == 'true' else f'({nv}) ? -1 : 0'}, {flex});")
                out.append("} else {")
                out.append(f"  w.array_length(static_cast<int32_t>({x}->size()), {flex});")
                if not f.is_struct and f.base in FIXED_WIDTH_ARRAY_BASES:
                    out.append(f"  w.fixed_array(*{x});")
                else:
                    out.append(f"  for (const auto& item_ : *{x}) {elem}")
                out.append("}")
            else:
                out.append(f"w.array_length(static_cast<int32_t>({x}.size()), {flex});")
                if not f.is_struct and f.base in FIXED_WIDTH_ARRAY_BASES:
                    out.append(f"w.fixed_array({x});")
                else:
                    out.append(f"for (const auto& item_ : {x}) {elem}")
            return out
        if f.is_struct:
            if f.optional():
                if nv != "false":
                    out.append(f"if ({nv}) {{" if nv != "true" else "{")
                    out.append(f"  if (!{x}) {{ w.int8(-1); }} else {{ w.int8(1); {x}->write(w, version); }}")
                    out.append("}" if nv == "true" else "} else {")
                    if nv != "true":
                        out.append(f"  if ({x}) {x}->write(w, version); else {f.base}{{}}.write(w, version);")
                        out.append("}")
                else:
                    out.append(f"if ({x}) {x}->write(w, version); else {f.base}{{}}.write(w, version);")
            else:
                out.append(f"{x}.write(w, version);")
            return out
        if f.base == "records":
            out.append(f"w.nullable_bytes({x}, {flex});")
            return out
        if f.base in ("string", "bytes"):
            fn = f.base
            empty_v = "std::string_view{}" if f.base == "string" else "Bytes{}"
            if f.optional():
                if nv == "true":
                    out.append(f"w.nullable_{fn}({x}, {flex});")
                else:
                    out.append(f"if ({nv}) w.nullable_{fn}({x}, {flex}); else w.{fn}({x}.value_or({empty_v}), {flex});")
            else:
                out.append(f"w.{fn}({x}, {flex});")
            return out
        out.append(f"{SCALARS[f.base][3]}({x});")
        return out

    def write_elem(self, f, flex):
        if f.is_struct:
            return "item_.write(w, version);"
        if f.base == "string":
            return f"w.string(item_, {flex});"
        return f"{SCALARS[f.base][3]}(item_);"

    # ---- size
    def size_value(self, f, x, flex, n="n"):
        nv = cond(f.nullable, intersect(f.versions, self.valid)) if f.nullable_any else "false"
        out = []
        if f.is_array:
            if f.is_struct:
                elem = f"for (const auto& item_ : {{v}}) {n} += item_.size(version);"
            elif f.base == "string":
                elem = f"for (const auto& item_ : {{v}}) {n} += string_prefix_size(item_.size(), {flex}) + item_.size();"
            else:
                elem = f"{n} += ({{v}}).size() * {SCALARS[f.base][1]};"
            if f.optional():
                out.append(f"if (!{x}) {{")
                out.append(f"  {n} += {'null_prefix_size(' + flex + ', 4)' if nv == 'true' else f'({nv}) ? null_prefix_size({flex}, 4) : array_prefix_size(0, {flex})'};")
                out.append("} else {")
                out.append(f"  {n} += array_prefix_size({x}->size(), {flex});")
                out.append("  " + elem.format(v=f"*{x}"))
                out.append("}")
            else:
                out.append(f"{n} += array_prefix_size({x}.size(), {flex});")
                out.append(elem.format(v=x))
            return out
        if f.is_struct:
            if f.optional():
                if nv == "false":
                    out.append(f"{n} += {x} ? {x}->size(version) : {f.base}{{}}.size(version);")
                elif nv == "true":
                    out.append(f"{n} += 1 + ({x} ? {x}->size(version) : 0);")
                else:
                    out.append(f"if ({nv}) {n} += 1 + ({x} ? {x}->size(version) : 0);")
                    out.append(f"else {n} += {x} ? {x}->size(version) : {f.base}{{}}.size(version);")
            else:
                out.append(f"{n} += {x}.size(version);")
            return out
        if f.base in ("string", "bytes", "records"):
            pf = "string_prefix_size" if f.base == "string" else "bytes_prefix_size"
            width = 2 if f.base == "string" else 4
            if f.optional():
                if nv == "true" or f.base == "records":
                    out.append(f"{n} += {x} ? {pf}({x}->size(), {flex}) + {x}->size() : null_prefix_size({flex}, {width});")
                else:
                    out.append(f"if ({x}) {n} += {pf}({x}->size(), {flex}) + {x}->size();")
                    out.append(f"else {n} += ({nv}) ? null_prefix_size({flex}, {width}) : {pf}(0, {flex});")
            else:
                out.append(f"{n} += {pf}({x}.size(), {flex}) + {x}.size();")
            return out
        out.append(f"{n} += {SCALARS[f.base][1]};")
        return out

    # ---- methods
    def read_body(self):
        s, msg = self.s, self.msg
        out = []
        if s is msg.top:
            out.append(f"*this = {s.name}{{}};")
            out.append(f"r.set_message(k{'Name'}, version);")
        flex = msg.flexible_cond()
        out.append(f"[[maybe_unused]] const bool flexible_ = {flex};")
        for f in s.regular:
            c = cond(f.versions, self.valid)
            body = [f"r.set_field({cpp_string(self.path(f))});"] + self.read_value(f, f.member, self.compact(f))
            out += when(c, body, "")
        if flex != "false":
            body = []
            body.append(f"r.set_field({cpp_string(self.path_tagged())});")
            body.append("const uint32_t tag_count_ = read_tag_count(r);")
            body.append("for (uint32_t i_ = 0; i_ < tag_count_ && r.ok(); ++i_) {")
            body.append("  uint32_t tag_ = 0;")
            body.append("  uint32_t tag_size_ = 0;")
            body.append("  if (!read_tag_header(r, tag_, tag_size_)) break;")
            if s.tagged:
                body.append("  const size_t tag_end_ = r.offset() + tag_size_;")
                body.append("  switch (tag_) {")
                for f in s.tagged:
                    c = cond(f.tagged_versions, self.valid)
                    inner = [f"r.set_field({cpp_string(self.path(f))});"] + self.read_value(f, f.member, "true")
                    inner += [f"check_tag_end(r, tag_end_);", f"r.set_field({cpp_string(self.path_tagged())});", "continue;"]
                    body.append(f"    case {f.tag}:")
                    body += when(c, inner, "      ")
                    body.append("      break;")
                    if c == "true":
                        body.pop()
                body.append("    default:")
                body.append("      break;")
                body.append("  }")
            body.append("  unknown_tagged_fields.push_back({tag_, r.raw(tag_size_)});")
            body.append("}")
            out += when(flex, body, "")
        return out

    def path_tagged(self):
        return "_tagged_fields" if self.s is self.msg.top else f"{self.s.name}._tagged_fields"

    def write_body(self):
        s, msg = self.s, self.msg
        out = []
        flex = msg.flexible_cond()
        out.append(f"[[maybe_unused]] const bool flexible_ = {flex};")
        for f in s.regular:
            out += when(cond(f.versions, self.valid), self.write_value(f, f.member, self.compact(f)), "")
        if flex != "false":
            body = []
            for i, f in enumerate(s.tagged):
                c = cond(f.tagged_versions, self.valid)
                body.append(f"const bool has_tag{i}_ = {'' if c == 'true' else f'({c}) && '}{f.non_default_cond(f.member)};")
            body.append("w.uvarint(static_cast<uint32_t>(unknown_tagged_fields.size()"
                        + "".join(f" + has_tag{i}_" for i in range(len(s.tagged))) + "));")
            if s.tagged:
                body.append("size_t next_unknown_ = 0;")
                for i, f in enumerate(s.tagged):
                    body.append(f"next_unknown_ = write_unknown_tags_below(w, unknown_tagged_fields, next_unknown_, {f.tag});")
                    body.append(f"if (has_tag{i}_) {{")
                    body.append(f"  size_t payload_ = 0;")
                    body += ["  " + l for l in self.size_value(f, f.member, "true", "payload_")]
                    body.append(f"  w.uvarint({f.tag});")
                    body.append("  w.uvarint(static_cast<uint32_t>(payload_));")
                    body += ["  " + l for l in self.write_value(f, f.member, "true")]
                    body.append("}")
                body.append("write_unknown_tags_from(w, unknown_tagged_fields, next_unknown_);")
            else:
                body.append("write_unknown_tags_from(w, unknown_tagged_fields, 0);")
            out += when(flex, body, "")
        return out

    def size_body(self):
        s, msg = self.s, self.msg
        out = ["size_t n = 0;"]
        flex = msg.flexible_cond()
        out.append(f"[[maybe_unused]] const bool flexible_ = {flex};")
        for f in s.regular:
            out += when(cond(f.versions, self.valid), self.size_value(f, f.member, self.compact(f)), "")
        if flex != "false":
            body = []
            body.append("uint32_t tag_count_ = static_cast<uint32_t>(unknown_tagged_fields.size());")
            body.append("for (const auto& u_ : unknown_tagged_fields) n += tagged_field_size(u_.tag, u_.data.size());")
            for f in s.tagged:
                c = cond(f.tagged_versions, self.valid)
                body.append(f"if ({'' if c == 'true' else f'({c}) && '}{f.non_default_cond(f.member)}) {{")
                body.append("  size_t payload_ = 0;")
                body += ["  " + l for l in self.size_value(f, f.member, "true", "payload_")]
                body.append(f"  n += tagged_field_size({f.tag}, payload_);")
                body.append("  ++tag_count_;")
                body.append("}")
            body.append("n += uvarint_size(tag_count_);")
            out += when(flex, body, "")
        out.append("return n;")
        return out

    def json_value(self, f, x):
        def scalar(v, base):
            if base == "string":
                return f"std::string({v})"
            if base == "bytes":
                return f"json_bytes({v})"
            if base == "uuid":
                return f"json_uuid({v})"
            if base == "int8":
                return f"static_cast<int>({v})"
            return v
        if f.is_array:
            if f.is_struct:
                conv = "json_array(*v, version)" if False else None
            lines = []
            src = f"*{x}" if f.optional() else x
            lines.append("{")
            lines.append("  nlohmann::json items_ = nlohmann::json::array();")
            if f.optional():
                lines.append(f"  if ({x}) {{")
            else:
                lines.append("  {")
            if f.is_struct:
                lines.append(f"    for (const auto& item_ : {src}) {{ nlohmann::json j; item_.to_json(j, version); items_.push_back(std::move(j)); }}")
            else:
                lines.append(f"    for (const auto& item_ : {src}) items_.push_back({scalar('item_', f.base)});")
            if f.optional():
                lines.append("  } else {")
                lines.append("    items_ = nullptr;")
            lines.append("  }")
            lines.append(f"  out[{cpp_string(f.name)}] = std::move(items_);")
            lines.append("}")
            return lines
        if f.is_struct:
            if f.optional():
                return [f"if ({x}) {x}->to_json(out[{cpp_string(f.name)}], version); else out[{cpp_string(f.name)}] = nullptr;"]
            return [f"{x}.to_json(out[{cpp_string(f.name)}], version);"]
        if f.base == "records":
            return [f"out[{cpp_string(f.name)}] = json_records({x});"]
        if f.optional():
            return [f"if ({x}) out[{cpp_string(f.name)}] = {scalar('*' + x, f.base)}; else out[{cpp_string(f.name)}] = nullptr;"]
        return [f"out[{cpp_string(f.name)}] = {scalar(x, f.base)};"]

    def json_body(self):
        out = ["out = nlohmann::json::object();"]
        for f in self.s.fields:
            out += when(cond(f.versions, self.valid), self.json_value(f, f.member), "")
        out.append("if (!unknown_tagged_fields.empty()) out[\"_unknown_tagged_fields\"] = json_unknown_tags(unknown_tagged_fields);")
        return out

    def is_default_body(self):
        conds = [f.non_default_cond(f.member) for f in self.s.fields]
        conds.append("!unknown_tagged_fields.empty()")
        return ["return !(" + " ||\n           ".join(conds) + ");"]

    def unsupported_body(self):
        """Kafka's write-time checks: a non-ignorable field absent at the version must hold its
        default (Java: UnsupportedVersionException), and null only where the version allows it."""
        out = []
        for f in self.s.fields:
            pres = cond(f.tagged_versions if f.tagged else f.versions, self.valid)
            label = cpp_string(self.path(f))
            if not f.ignorable and pres != "true":
                c = f.non_default_cond(f.member)
                out.append(f"if (!({pres}) && {c}) return {label};" if pres != "false" else f"if ({c}) return {label};")
            if f.optional() and f.base != "records":
                nv = cond(f.nullable, intersect(f.versions, self.valid)) if f.nullable_any else "false"
                if nv != "true" and not f.tagged:
                    out += when(pres, [f"if (!({nv}) && !{f.member}.has_value()) return {label};"], "")
            if f.is_struct:
                if f.is_array:
                    src = f"*{f.member}" if f.optional() else f.member
                    body = [("if (%s) " % f.member if f.optional() else "") +
                            f"for (const auto& item_ : {src}) if (const char* bad_ = item_.unsupported_field(version)) return bad_;"]
                else:
                    acc = f"{f.member}->" if f.optional() else f"{f.member}."
                    body = [("if (%s) " % f.member if f.optional() else "") +
                            f"if (const char* bad_ = {acc}unsupported_field(version)) return bad_;"]
                out += when(pres, body, "")
        out.append("return nullptr;")
        return out

    def errors_body(self, depth):
        out = []
        for f in self.s.fields:
            role = f.scope_role(self.s.name)
            if role is None:
                continue
            c = cond(f.versions, self.valid)
            if f.optional():
                out += when(c, [f"if ({f.member}) scope.{role} = *{f.member};"], "")
            else:
                out += when(c, [f"scope.{role} = {f.member};"], "")
        if any(f.is_struct and self.msg.structs[f.base].has_errors for f in self.s.fields):
            out.append("ErrorScope inner = scope;")
            out.append("++inner.depth;")
        for f in self.s.fields:
            c = cond(f.versions, self.valid)
            if f.is_error_code():
                out += when(c, [f"scope.field = {cpp_string(f.name)};", f"visit({f.member}, scope);"], "")
            elif f.is_struct and self.msg.structs[f.base].has_errors:
                if f.is_array:
                    src = f"*{f.member}" if f.optional() else f.member
                    body = [f"for (auto& item_ : {src}) item_.visit_errors(version, visit, inner);"]
                    if f.optional():
                        body = [f"if ({f.member}) " + body[0]]
                else:
                    body = [f"{f.member}{'->' if f.optional() else '.'}visit_errors(version, visit, inner);"]
                    if f.optional():
                        body = [f"if ({f.member}) " + body[0]]
                out += when(c, body, "")
        return out

    def entities_body(self):
        out = []
        for f in self.s.fields:
            c = cond(f.versions, self.valid)
            kind = f.entity_kind()
            body = []
            if kind:
                if f.is_array:
                    src = f"*{f.member}" if f.optional() else f.member
                    call = "visit(EntityKind::%s, item_, 0)" % kind if f.base == "string" else "visit(EntityKind::%s, {}, item_)" % kind
                    body = [("if (%s) " % f.member if f.optional() else "") + f"for (const auto& item_ : {src}) {call};"]
                elif f.base == "string":
                    if f.optional():
                        body = [f"if ({f.member}) visit(EntityKind::{kind}, *{f.member}, 0);"]
                    else:
                        body = [f"visit(EntityKind::{kind}, {f.member}, 0);"]
                elif f.base == "uuid":
                    body = [f"visit(EntityKind::{kind}, std::string_view(reinterpret_cast<const char*>({f.member}.data()), {f.member}.size()), 0);"]
                else:
                    body = [f"visit(EntityKind::{kind}, {{}}, {f.member});"]
            elif f.is_struct and self.msg.structs[f.base].has_entities:
                if f.is_array:
                    src = f"*{f.member}" if f.optional() else f.member
                    body = [("if (%s) " % f.member if f.optional() else "") + f"for (const auto& item_ : {src}) item_.visit_entities(version, visit);"]
                else:
                    body = [("if (%s) " % f.member if f.optional() else "") + f"{f.member}{'->' if f.optional() else '.'}visit_entities(version, visit);"]
            out += when(c, body, "")
        return out

    # ---- random / smallest fill
    def fill_value(self, f, x, nested_prefix, tagged):
        nv = cond(f.nullable, intersect(f.versions, self.valid)) if f.nullable_any else "false"
        out = []
        null_guard = None
        if f.optional() and nv != "false" and f.base != "records":
            null_guard = nv
        if f.base == "records":
            null_guard = nv if f.nullable_any else None
        if f.is_array:
            t = f"{nested_prefix}{f.base}" if f.is_struct else f.elem_cpp()
            lines = [f"auto& items_ = {'*' + f.engage(x, nested_prefix) if f.optional() else x};",
                     f"for (size_t i_ = 0, count_ = f.count({'true' if tagged else 'false'}); i_ < count_; ++i_) {{"]
            if f.is_struct:
                lines.append(f"  fill(f, items_.emplace_back(), version);")
            elif f.base == "string":
                lines.append("  items_.push_back(f.string());")
            else:
                lines.append(f"  items_.push_back({SCALARS[f.base][4]});")
            lines.append("}")
            lines = ["{"] + ["  " + l for l in lines] + ["}"]
            del t
        elif f.is_struct:
            lines = [f"fill(f, {'*' + f.engage(x, nested_prefix) if f.optional() else x}, version);"]
        elif f.base == "string":
            lines = [f"{x} = f.string();"]
        elif f.base == "bytes":
            lines = [f"{x} = f.bytes();"]
        elif f.base == "records":
            lines = [f"{x} = f.bytes();"]
        else:
            lines = [f"{x} = {SCALARS[f.base][4]};"]
        if null_guard is not None:
            reset = f"{x} = std::nullopt;"
            g = "f.null()" if null_guard == "true" else f"({null_guard}) && f.null()"
            out.append(f"if ({g}) {{")
            out.append("  " + reset)
            out.append("} else {")
            out += ["  " + l for l in lines]
            out.append("}")
        else:
            if f.optional() and not f.is_struct and f.base != "records" and not f.is_array:
                pass
            out += lines
        return out

    def fill_body(self, qual):
        out = []
        flex = self.msg.flexible_cond()
        for f in self.s.regular:
            out += when(cond(f.versions, self.valid), self.fill_value(f, f"x.{f.member}", qual, False), "")
        if self.s.tagged:
            for f in self.s.tagged:
                body = ["if (!f.smallest()) {"] + ["  " + l for l in self.fill_value(f, f"x.{f.member}", qual, True)] + ["}"]
                out += when(cond(f.tagged_versions, self.valid), body, "")
        if flex != "false":
            tags = ", ".join(str(f.tag) for f in self.s.tagged)
            out += when(flex, [f"f.unknown_tags(x.unknown_tagged_fields, {{{tags}}});"], "")
        return out


# ---------------------------------------------------------------------------------------------
# Files

class Output:
    def __init__(self, root, schema_rel):
        self.root = root
        self.schema_rel = schema_rel
        self.files = {}

    def add(self, rel, lines):
        head = f"// Code generated by codec/gen/generate.py from {self.schema_rel}. DO NOT EDIT."
        self.files[rel] = head + "\n" + "\n".join(lines).rstrip() + "\n"

    def write(self):
        for rel, text in sorted(self.files.items()):
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            old = None
            if os.path.exists(path):
                with open(path) as fh:
                    old = fh.read()
            if old != text:
                with open(path, "w") as fh:
                    fh.write(text)


def gen_api_keys(out, reqs, resps):
    keys = sorted(reqs)
    h = ["// Kafka API keys and their version tables, from Kafka's message definitions.",
         "#pragma once", "", "#include <cstdint>", "#include <optional>", "#include <span>", "#include <string_view>", "",
         "namespace kproxy::codec {", "",
         "/// Every API key Kafka defines (including removed ones, whose version range is empty).",
         "enum class ApiKey : int16_t {"]
    for k in keys:
        h.append(f"  k{api_base_name(reqs[k].name)} = {k},")
    h += ["};", "",
          "/// An inclusive version range; empty when min > max.",
          "struct VersionRange {",
          "  int16_t min = 0;",
          "  int16_t max = -1;",
          "  bool empty() const { return min > max; }",
          "  bool contains(int16_t v) const { return v >= min && v <= max; }",
          "};", "",
          "/// Kafka's name of an API (\"Metadata\"), or nullptr for a key Kafka does not define.",
          "const char* api_name(int16_t api_key);",
          "/// The key of an API by its name (\"Metadata\"), or nullopt.",
          "std::optional<int16_t> api_key_for_name(std::string_view name);",
          "/// Every API key Kafka defines, ascending.",
          "std::span<const int16_t> all_api_keys();",
          "/// Versions Kafka 4.4.0 defines for requests of `api_key` (empty for unknown or removed APIs).",
          "VersionRange request_versions(int16_t api_key);",
          "/// Versions Kafka defines for responses of `api_key` (equal to the request versions in 4.4.0).",
          "VersionRange response_versions(int16_t api_key);",
          "/// True when `version` is a defined request version of `api_key`.",
          "bool is_valid_version(int16_t api_key, int16_t version);",
          "/// First flexible (KIP-482) version of the request, or -1 if never flexible or unknown.",
          "int16_t first_flexible_version(int16_t api_key);",
          "/// True when the latest version is marked unstable (latestVersionUnstable) in Kafka.",
          "bool latest_version_unstable(int16_t api_key);",
          "/// Request header version for a request, or -1 for an unknown key or version.",
          "/// Non-flexible bodies use header v1, flexible ones v2.",
          "int request_header_version(int16_t api_key, int16_t version);",
          "/// Response header version, or -1 for an unknown key or version. Non-flexible bodies use",
          "/// header v0, flexible ones v1, except ApiVersions, whose responses always use v0 (KIP-511).",
          "int response_header_version(int16_t api_key, int16_t version);", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/api_keys.h", h)
    c = ['#include "codec/api_keys.h"', "", "#include <array>", "", "namespace kproxy::codec {", "namespace {", "",
         "struct ApiInfo {", "  int16_t key;", "  const char* name;", "  VersionRange request;", "  VersionRange response;",
         "  int16_t request_flexible;   // -1: never", "  int16_t response_flexible;  // -1: never", "  bool unstable;", "};", "",
         f"constexpr std::array<ApiInfo, {len(keys)}> kApis{{{{"]
    for k in keys:
        rq, rs = reqs[k], resps[k]

        def rng(m):
            return f"{{{m.valid[0]}, {min(m.valid[1], 0x7fff)}}}" if not m.removed else "{0, -1}"

        def fl(m):
            if m.removed or empty(m.flexible):
                return "-1"
            return str(max(m.flexible[0], m.valid[0]))
        c.append(f"    {{{k}, {cpp_string(api_base_name(rq.name))}, {rng(rq)}, {rng(rs)}, {fl(rq)}, {fl(rs)}, {'true' if rq.unstable else 'false'}}},")
    c += ["}};", "",
          f"constexpr std::array<int16_t, {len(keys)}> kKeys{{" + ", ".join(str(k) for k in keys) + "};", "",
          "const ApiInfo* find(int16_t key) {",
          "  for (const auto& a : kApis) {",
          "    if (a.key == key) return &a;",
          "  }",
          "  return nullptr;",
          "}", "",
          "}  // namespace", "",
          "const char* api_name(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a ? a->name : nullptr;",
          "}", "",
          "std::optional<int16_t> api_key_for_name(std::string_view name) {",
          "  for (const auto& a : kApis) {",
          "    if (name == a.name) return a.key;",
          "  }",
          "  return std::nullopt;",
          "}", "",
          "std::span<const int16_t> all_api_keys() { return kKeys; }", "",
          "VersionRange request_versions(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a ? a->request : VersionRange{};",
          "}", "",
          "VersionRange response_versions(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a ? a->response : VersionRange{};",
          "}", "",
          "bool is_valid_version(int16_t api_key, int16_t version) { return request_versions(api_key).contains(version); }", "",
          "int16_t first_flexible_version(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a ? a->request_flexible : -1;",
          "}", "",
          "bool latest_version_unstable(int16_t api_key) {",
          "  const ApiInfo* a = find(api_key);",
          "  return a != nullptr && a->unstable;",
          "}", "",
          "int request_header_version(int16_t api_key, int16_t version) {",
          "  const ApiInfo* a = find(api_key);",
          "  if (a == nullptr || !a->request.contains(version)) return -1;",
          "  return a->request_flexible >= 0 && version >= a->request_flexible ? 2 : 1;",
          "}", "",
          "int response_header_version(int16_t api_key, int16_t version) {",
          "  const ApiInfo* a = find(api_key);",
          "  if (a == nullptr || !a->response.contains(version)) return -1;",
          f"  if (api_key == {[k for k in keys if reqs[k].name == 'ApiVersionsRequest'][0]}) return 0;  // ApiVersions: always v0 (KIP-511)",
          "  return a->response_flexible >= 0 && version >= a->response_flexible ? 1 : 0;",
          "}", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/api_keys.cc", c)


def gen_errors(out, errors):
    h = ["// Kafka's error codes (org.apache.kafka.common.protocol.Errors), listed at import time.",
         "#pragma once", "", "#include <cstdint>", "#include <optional>", "#include <span>", "#include <string_view>", "",
         "namespace kproxy::codec {", "", "enum class ErrorCode : int16_t {"]
    seen = set()
    for e in errors:
        if not re.match(r"^[A-Z][A-Z0-9_]*$", e["name"]) or not isinstance(e["code"], int):
            raise GenError(f"bad error entry {e!r}")
        n = "k" + upper_to_camel(e["name"])
        if n in seen:
            raise GenError(f"two errors map to {n}")
        seen.add(n)
        h.append(f"  {n} = {e['code']},  // {e['name']}")
    h += ["};", "",
          "/// Kafka's upper-case name of an error code (\"NOT_COORDINATOR\"), or nullptr if unknown.",
          "const char* error_name(int16_t code);",
          "/// The code of an error by Kafka's name (\"NOT_COORDINATOR\"), or nullopt.",
          "std::optional<int16_t> error_code_for_name(std::string_view name);",
          "/// Every error code Kafka defines, ascending.",
          "std::span<const int16_t> all_error_codes();", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/error_code.h", h)
    codes = [e["code"] for e in errors]
    lo = min(codes)
    c = ['#include "codec/error_code.h"', "", "#include <array>", "", "namespace kproxy::codec {", "namespace {", "",
         f"constexpr int16_t kLowest = {lo};",
         "// Indexed by code - kLowest; nullptr where Kafka defines no error.",
         f"constexpr std::array<const char*, {max(codes) - lo + 1}> kNames{{"]
    by = {e["code"]: e["name"] for e in errors}
    for code in range(lo, max(codes) + 1):
        c.append(f"    {cpp_string(by[code]) if code in by else 'nullptr'},  // {code}")
    c += ["};", f"constexpr std::array<int16_t, {len(codes)}> kCodes{{" + ", ".join(str(x) for x in sorted(codes)) + "};", "",
          "}  // namespace", "",
          "const char* error_name(int16_t code) {",
          "  if (code < kLowest || code - kLowest >= static_cast<int>(kNames.size())) return nullptr;",
          "  return kNames[static_cast<size_t>(code - kLowest)];",
          "}", "",
          "std::optional<int16_t> error_code_for_name(std::string_view name) {",
          "  for (size_t i = 0; i < kNames.size(); ++i) {",
          "    if (kNames[i] != nullptr && name == kNames[i]) return static_cast<int16_t>(static_cast<int>(i) + kLowest);",
          "  }",
          "  return std::nullopt;",
          "}", "",
          "std::span<const int16_t> all_error_codes() { return kCodes; }", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/error_code.cc", c)


def struct_decl(msg, s, indent):
    top = s is msg.top
    lines = []
    if top:
        if msg.kind == "header":
            lines.append(f"struct {s.name} {{")
        else:
            lines.append(f"struct {s.name} final : Message {{")
    else:
        lines.append(f"{indent}struct {s.name} {{")
    ind = indent + "  " if not top else "  "
    if top:
        for sub in msg.order[:-1]:
            lines += struct_decl(msg, sub, "  ")
            lines.append("")
        lines.append(f"  static constexpr const char* kName = {cpp_string(msg.name)};")
        if msg.kind != "header":
            lines.append(f"  static constexpr int16_t kApiKey = {msg.api_key};")
        lines.append(f"  static constexpr int16_t kMinVersion = {msg.valid[0]};")
        lines.append(f"  static constexpr int16_t kMaxVersion = {msg.valid[1]};")
        lines.append("")
    for f in s.fields:
        d = f.default_expr()
        init = f" = {d}" if d else ("{}" if f.cpp_type() in ("std::string_view", "Bytes", "Uuid") or f.optional() or f.is_array or f.is_struct else " = 0" if f.base != "bool" else " = false")
        if f.base == "float64" and not d:
            init = " = 0.0"
        if f.optional() and not f.default_is_null() and not d:
            # Nullable without a "null" default: Kafka's default is the empty value, not null.
            inner = f.cpp_type()[len("std::optional<"):-1]
            init = f"{{std::in_place}}" if f.is_array or f.is_struct else f" = {inner}{{}}"
        comment = f"  // {f.name}: v{f.versions[0]}{'+' if f.versions[1] >= msg.valid[1] else '-' + str(f.versions[1])}"
        if f.tagged:
            comment += f", tag {f.tag}"
        if f.nullable_any:
            comment += ", nullable"
        lines.append(f"{ind}{f.cpp_type()} {f.member}{init};{comment}")
    lines.append(f"{ind}UnknownTaggedFields unknown_tagged_fields;")
    lines.append("")
    if top and msg.kind != "header":
        lines.append(f"  int16_t api_key() const override {{ return kApiKey; }}")
        lines.append(f"  bool is_request() const override {{ return {'true' if msg.kind == 'request' else 'false'}; }}")
        lines.append(f"  const char* name() const override {{ return kName; }}")
        lines.append("  void read(Reader& r, int16_t version) override;")
        lines.append("  void write(Writer& w, int16_t version) const override;")
        lines.append("  size_t size(int16_t version) const override;")
        lines.append("  void to_json(nlohmann::json& out, int16_t version) const override;")
        lines.append("  void for_each_error_code(int16_t version, const ErrorCodeVisitor& visit) override;")
        lines.append("  void for_each_entity(int16_t version, const EntityVisitor& visit) const override;")
        if throttle_field(msg):
            lines.append("  int32_t* throttle_time(int16_t version) override;")
    else:
        lines.append(f"{ind}void read(Reader& r, int16_t version);")
        lines.append(f"{ind}void write(Writer& w, int16_t version) const;")
        lines.append(f"{ind}size_t size(int16_t version) const;")
        lines.append(f"{ind}void to_json(nlohmann::json& out, int16_t version) const;")
        if top:
            lines.append("  void for_each_error_code(int16_t version, const ErrorCodeVisitor& visit);")
            lines.append("  void for_each_entity(int16_t version, const EntityVisitor& visit) const;")
    if top and msg.kind != "header":
        lines.append("  const char* unsupported_field(int16_t version) const override;")
    else:
        lines.append(f"{ind}const char* unsupported_field(int16_t version) const;")
    if s.needs_is_default:
        lines.append(f"{ind}bool is_default() const;")
    if s.has_errors:
        lines.append(f"{ind}void visit_errors(int16_t version, const ErrorCodeVisitor& visit, ErrorScope scope);")
    if s.has_entities:
        lines.append(f"{ind}void visit_entities(int16_t version, const EntityVisitor& visit) const;")
    lines.append(f"{indent if not top else ''}}};")
    return lines


def throttle_field(msg):
    """The top-level int32 ThrottleTimeMs of a response, or None."""
    if msg.kind != "response":
        return None
    for f in msg.top.fields:
        if f.name == "ThrottleTimeMs" and f.base == "int32" and not f.is_array and not f.optional():
            return f
    return None


def func(sig, body):
    return [sig + " {"] + ["  " + l if l else "" for l in "\n".join(body).split("\n")] + ["}", ""]


def struct_defs(msg, s, depth):
    top = s is msg.top
    q = msg.cpp_name if top else f"{msg.cpp_name}::{s.name}"
    g = Gen(msg, s)
    out = []
    mu = "[[maybe_unused]] "
    out += func(f"void {q}::read({mu}Reader& r, {mu}int16_t version)", g.read_body())
    out += func(f"void {q}::write({mu}Writer& w, {mu}int16_t version) const", g.write_body())
    out += func(f"size_t {q}::size({mu}int16_t version) const", g.size_body())
    out += func(f"void {q}::to_json(nlohmann::json& out, {mu}int16_t version) const", g.json_body())
    out += func(f"const char* {q}::unsupported_field({mu}int16_t version) const", g.unsupported_body())
    if s.needs_is_default:
        out += func(f"bool {q}::is_default() const", g.is_default_body())
    if s.has_errors:
        out += func(f"void {q}::visit_errors([[maybe_unused]] int16_t version, const ErrorCodeVisitor& visit, ErrorScope scope)",
                    g.errors_body(depth))
    if s.has_entities:
        out += func(f"void {q}::visit_entities([[maybe_unused]] int16_t version, const EntityVisitor& visit) const",
                    g.entities_body())
    if top:
        body = ["visit_errors(version, visit, ErrorScope{});"] if s.has_errors else ["(void)version;", "(void)visit;"]
        out += func(f"void {q}::for_each_error_code(int16_t version, const ErrorCodeVisitor& visit)", body)
        body = ["visit_entities(version, visit);"] if s.has_entities else ["(void)version;", "(void)visit;"]
        out += func(f"void {q}::for_each_entity(int16_t version, const EntityVisitor& visit) const", body)
        t = throttle_field(msg)
        if t:
            c = cond(t.versions, msg.valid)
            body = [f"return &{t.member};"] if c == "true" else [f"return {c} ? &{t.member} : nullptr;"] if c != "false" else ["return nullptr;"]
            out += func(f"int32_t* {q}::throttle_time([[maybe_unused]] int16_t version)", body)
    return out


def struct_depths(msg):
    depths = {msg.top.name: 0}
    todo = [msg.top]
    while todo:
        s = todo.pop()
        for f in s.fields:
            if f.is_struct and f.base not in depths:
                depths[f.base] = depths[s.name] + 1
                todo.append(msg.structs[f.base])
    return depths


def gen_messages(out, msgs, chunks):
    groups = {}
    for m in msgs:
        groups.setdefault(m.header_name(), []).append(m)
    for hname, ms in sorted(groups.items()):
        h = [f"// Kafka {', '.join(m.name for m in ms)}.", "#pragma once", "",
             "#include <cstdint>", "#include <limits>", "#include <optional>", "#include <string_view>", "#include <vector>", "",
             "#include <nlohmann/json_fwd.hpp>", "", '#include "codec/message.h"', '#include "codec/reader.h"',
             '#include "codec/tagged_fields.h"', '#include "codec/writer.h"', "",
             "namespace kproxy::codec {", ""]
        for m in ms:
            h += struct_decl(m, m.top, "")
            h.append("")
        h.append("}  // namespace kproxy::codec")
        out.add(f"codec/messages/{hname}.h", h)
    names = sorted(groups)
    out.add("codec/messages.h", ["// Every Kafka request, response and header message kproxy knows.", "#pragma once", ""] +
            [f'#include "codec/messages/{n}.h"' for n in names])
    # Implementation chunks, balanced by rough size.
    weights = sorted(((sum(len(m.order) + sum(len(s.fields) for s in m.order) for m in groups[n]), n) for n in names), reverse=True)
    bins = [[0, []] for _ in range(chunks)]
    for w, n in weights:
        b = min(bins, key=lambda b: b[0])
        b[0] += w
        b[1].append(n)
    for i, (_, ns) in enumerate(bins):
        c = ["#include <bit>", "#include <memory>", "#include <nlohmann/json.hpp>", "", '#include "codec/message_support.h"']
        c += [f'#include "codec/messages/{n}.h"' for n in sorted(ns)]
        c += ["", "namespace kproxy::codec {", ""]
        for n in sorted(ns):
            for m in groups[n]:
                depths = struct_depths(m)
                for s in m.order:
                    c += struct_defs(m, s, depths[s.name])
        # Factories for this chunk's messages: instantiating every message's destructor in one
        # file would cost as much as a chunk, here it is already instantiated.
        for kind in ("request", "response"):
            c.append(f"std::unique_ptr<Message> make_{kind}_{i}(int16_t api_key) {{")
            c.append("  switch (api_key) {")
            for n in sorted(ns):
                for m in groups[n]:
                    if m.kind == kind:
                        c.append(f"    case {m.api_key}: return std::make_unique<{m.cpp_name}>();")
            c.append("    default: return nullptr;")
            c.append("  }")
            c.append("}")
            c.append("")
        c.append("}  // namespace kproxy::codec")
        out.add(f"codec/messages_{i}.cc", c)
    # Factories: dispatch to the chunk that holds the key.
    chunk_of = {}
    for i, (_, ns) in enumerate(bins):
        for n in ns:
            for m in groups[n]:
                if m.kind in ("request", "response"):
                    chunk_of[m.api_key] = i
    c = ['#include <memory>', "", '#include "codec/message.h"', "", "namespace kproxy::codec {", ""]
    for kind in ("request", "response"):
        for i in range(chunks):
            c.append(f"std::unique_ptr<Message> make_{kind}_{i}(int16_t api_key);")
    c.append("")
    for kind in ("request", "response"):
        c.append(f"std::unique_ptr<Message> make_{kind}(int16_t api_key) {{")
        c.append("  switch (api_key) {")
        for k in sorted(chunk_of):
            c.append(f"    case {k}: return make_{kind}_{chunk_of[k]}(api_key);")
        c.append("    default: return nullptr;")
        c.append("  }")
        c.append("}")
        c.append("")
    c.append("}  // namespace kproxy::codec")
    out.add("codec/message_factory.cc", c)
    return groups


def gen_testing(out, msgs, chunks):
    h = ["// Smallest and random instances of every generated message, for tests (not in the daemon).",
         "#pragma once", "", "#include <cstdint>", "#include <memory>", "", '#include "codec/messages.h"',
         '#include "codec/testing/filler.h"', "", "namespace kproxy::codec::testing {", ""]
    for m in msgs:
        for s in m.order:
            q = m.cpp_name if s is m.top else f"{m.cpp_name}::{s.name}"
            h.append(f"void fill(Filler& f, {q}& x, int16_t version);")
    h += ["",
          "/// A message for (api_key, request?, version) filled by `f`, or nullptr for an unknown key.",
          "std::unique_ptr<Message> make_instance(int16_t api_key, bool request, int16_t version, Filler& f);", "",
          "}  // namespace kproxy::codec::testing"]
    out.add("codec/testing/fill.h", h)
    per = [[] for _ in range(chunks)]
    for i, m in enumerate(msgs):
        per[i % chunks].append(m)
    for i, ms in enumerate(per):
        c = ['#include "codec/testing/fill.h"', "", "namespace kproxy::codec::testing {", ""]
        for m in ms:
            for s in m.order:
                q = m.cpp_name if s is m.top else f"{m.cpp_name}::{s.name}"
                body = Gen(m, s).fill_body(f"{m.cpp_name}::")
                c += func(f"void fill([[maybe_unused]] Filler& f, [[maybe_unused]] {q}& x, [[maybe_unused]] int16_t version)", body or ["(void)x;"])
        c.append("}  // namespace kproxy::codec::testing")
        out.add(f"codec/testing/fill_{i}.cc", c)
    c = ['#include "codec/testing/fill.h"', "", "namespace kproxy::codec::testing {", "",
         "std::unique_ptr<Message> make_instance(int16_t api_key, bool request, int16_t version, Filler& f) {",
         "  std::unique_ptr<Message> m = request ? make_request(api_key) : make_response(api_key);",
         "  if (!m) return nullptr;",
         "  switch (api_key) {"]
    by_key = {}
    for m in msgs:
        if m.kind in ("request", "response"):
            by_key.setdefault(m.api_key, {})[m.kind] = m
    for k in sorted(by_key):
        rq, rs = by_key[k]["request"], by_key[k]["response"]
        c.append(f"    case {k}:")
        c.append(f"      if (request) fill(f, static_cast<{rq.cpp_name}&>(*m), version); else fill(f, static_cast<{rs.cpp_name}&>(*m), version);")
        c.append("      break;")
    c += ["    default:", "      break;", "  }", "  return m;", "}", "", "}  // namespace kproxy::codec::testing"]
    out.add("codec/testing/make_instance.cc", c)


# ---------------------------------------------------------------------------------------------
# Response scanner: error codes and top-level tags without decoding (codec/response_scan.h)

class ScanGen:
    """Emits, per response struct, a function that walks its wire form without building it:
    every field is skipped as the decoder would read it (same nullability and bounds checks), an
    error-code field's non-zero value is reported with its offset, and the tags of the top-level
    tagged fields present are collected."""

    def __init__(self, msg):
        self.msg = msg

    def fn(self, s):
        return f"scan_{self.msg.cpp_name}_{s.name}"

    def scan_value(self, s, f, flex):
        msg = self.msg
        nv = cond(f.nullable, intersect(f.versions, msg.valid)) if f.nullable_any else "false"
        if f.is_array:
            out = ["{", f"  const int32_t count_ = r.array_length({flex});"]
            if not f.optional():
                out.append("  if (count_ < 0) r.fail(\"null array in a non-nullable field\");")
            elif nv != "true":
                out.append(f"  if (count_ < 0 && !({nv})) r.fail(\"null array in a non-nullable field\");")
            if f.is_struct:
                out.append(f"  for (int32_t i_ = 0; i_ < count_ && r.ok(); ++i_) {self.fn(msg.structs[f.base])}(r, version, depth + 1, out);")
            elif f.base == "string":
                out.append(f"  for (int32_t i_ = 0; i_ < count_ && r.ok(); ++i_) r.string({flex});")
            else:
                out.append(f"  if (count_ > 0) r.skip(static_cast<size_t>(count_) * {SCALARS[f.base][1]});")
            out.append("}")
            return out
        if f.is_struct:
            call = f"{self.fn(msg.structs[f.base])}(r, version, depth + 1, out);"
            if f.optional():
                if nv == "true":
                    return [f"if (r.int8() >= 0) {call}"]
                return [f"if (!({nv}) || r.int8() >= 0) {call}"]
            return [call]
        if f.base == "records":
            return [f"r.nullable_bytes({flex});"]
        if f.base in ("string", "bytes"):
            fn = "string" if f.base == "string" else "bytes"
            if f.optional():
                if nv == "true":
                    return [f"r.nullable_{fn}({flex});"]
                return [f"if ({nv}) r.nullable_{fn}({flex}); else r.{fn}({flex});"]
            return [f"r.{fn}({flex});"]
        if f.is_error_code():
            return ["{", "  const size_t at_ = r.offset();", "  const int16_t code_ = r.int16();",
                    "  if (code_ != 0 && r.ok()) out.add_error(code_, at_, depth);", "}"]
        return [f"r.skip({SCALARS[f.base][1]});"]

    def scans_inside(self, f):
        """A tagged field worth walking (it holds error codes); others are skipped by size."""
        return f.is_error_code() or (f.is_struct and self.msg.structs[f.base].has_errors)

    def walked_structs(self):
        """The structs a scan enters (in msg.order): those under regular fields, and those under
        tagged fields that hold error codes; any other tagged field is skipped by its size."""
        seen, todo = {self.msg.top.name}, [self.msg.top]
        while todo:
            s = todo.pop()
            for f in s.fields:
                if f.is_struct and (not f.tagged or self.scans_inside(f)) and f.base not in seen:
                    seen.add(f.base)
                    todo.append(self.msg.structs[f.base])
        return [s for s in self.msg.order if s.name in seen]

    def body(self, s):
        msg = self.msg
        top = s is msg.top
        flex = msg.flexible_cond()
        out = [f"[[maybe_unused]] const bool flexible_ = {flex};"]
        for f in s.regular:
            out += when(cond(f.versions, msg.valid), self.scan_value(s, f, "false" if f.flexible_override == "none" else "flexible_"), "")
        if flex != "false":
            b = ["const uint32_t tag_count_ = read_tag_count(r);",
                 "for (uint32_t i_ = 0; i_ < tag_count_ && r.ok(); ++i_) {",
                 "  uint32_t tag_ = 0;",
                 "  uint32_t tag_size_ = 0;",
                 "  if (!read_tag_header(r, tag_, tag_size_)) break;"]
            if top:
                b.append("  if (tag_ < 64) out.top_level_tags |= uint64_t{1} << tag_;")
            walked = [f for f in s.tagged if self.scans_inside(f)]
            if walked:
                b.append("  const size_t tag_end_ = r.offset() + tag_size_;")
                b.append("  switch (tag_) {")
                for f in walked:
                    inner = self.scan_value(s, f, "true") + ["check_tag_end(r, tag_end_);", "continue;"]
                    b.append(f"    case {f.tag}:")
                    b += when(cond(f.tagged_versions, msg.valid), inner, "      ")
                    if cond(f.tagged_versions, msg.valid) != "true":
                        b.append("      break;")
                b.append("    default:")
                b.append("      break;")
                b.append("  }")
            b.append("  r.skip(tag_size_);")
            b.append("}")
            out += when(flex, b, "")
        return out


def gen_response_scan(out, msgs):
    resps = sorted((m for m in msgs if m.kind == "response"), key=lambda m: m.api_key)
    h = ["// Error codes and top-level tagged fields of a response, found without decoding it.",
         "//",
         "// scan_response() walks a response body exactly as the generated decoder reads it (same",
         "// nullability and bounds checks) but builds nothing and allocates nothing: every field is",
         "// skipped, each non-zero error-code field (the fields for_each_error_code visits) is reported",
         "// with its offset in the body, and the tags of the top-level tagged fields present are",
         "// collected (e.g. KIP-951's NodeEndpoints, tag 0 of Produce v10+ and Fetch v16+ responses).",
         "// The hot path uses it to count errors and to know whether a body names brokers before",
         "// paying for a decode.",
         "#pragma once", "", "#include <array>", "#include <cstddef>", "#include <cstdint>", "",
         '#include "codec/reader.h"', "", "namespace kproxy::codec {", "",
         "/// One non-zero error code in a scanned response.",
         "struct ScannedError {",
         "  int16_t code;",
         "  uint32_t offset;  ///< of the int16 in the body (after the response header)",
         "  uint16_t depth;   ///< 0 = a field of the top-level struct, 1 = one struct down, ...",
         "};", "",
         "/// What scan_response() found.",
         "struct ResponseScan {",
         "  static constexpr size_t kMaxErrors = 32;",
         "  /// User-provided so that making one (once per response) does not clear `errors`.",
         "  ResponseScan() {}",
         "  std::array<ScannedError, kMaxErrors> errors;  ///< the first error_count are set",
         "  size_t error_count = 0;",
         "  bool errors_overflow = false;  ///< more than kMaxErrors non-zero codes: errors holds the first ones",
         "  uint64_t top_level_tags = 0;  ///< bit t: top-level tagged field t (< 64) is present",
         "",
         "  bool has_top_level_tag(uint32_t tag) const { return tag < 64 && (top_level_tags >> tag & 1) != 0; }",
         "  void add_error(int16_t code, size_t offset, int depth) {",
         "    if (error_count == kMaxErrors) {",
         "      errors_overflow = true;",
         "      return;",
         "    }",
         "    errors[error_count++] = ScannedError{code, static_cast<uint32_t>(offset), static_cast<uint16_t>(depth)};",
         "  }",
         "};", "",
         "/// Scans the response body `body` of `api_key` at `version` into `out` (reset first). False",
         "/// when the API or version is unknown or the body does not parse to its last byte; `out` is",
         "/// then incomplete and the caller decodes instead.",
         "bool scan_response(int16_t api_key, int16_t version, Bytes body, ResponseScan& out);", "",
         "}  // namespace kproxy::codec"]
    out.add("codec/response_scan.h", h)
    c = ['#include "codec/response_scan.h"', "", '#include "codec/message_support.h"', "", "namespace kproxy::codec {",
         "namespace {", ""]
    for m in resps:
        g = ScanGen(m)
        for s in g.walked_structs():
            c.append(f"void {g.fn(s)}(Reader& r, int16_t version, int depth, ResponseScan& out);")
    c.append("")
    for m in resps:
        g = ScanGen(m)
        for s in g.walked_structs():
            c += func(f"void {g.fn(s)}([[maybe_unused]] Reader& r, [[maybe_unused]] int16_t version, [[maybe_unused]] int depth, "
                      f"[[maybe_unused]] ResponseScan& out)", g.body(s))
    c += ["}  // namespace", "",
          "bool scan_response(int16_t api_key, int16_t version, Bytes body, ResponseScan& out) {",
          "  out.error_count = 0;", "  out.errors_overflow = false;", "  out.top_level_tags = 0;",
          "  Reader r(body);", "  switch (api_key) {"]
    for m in resps:
        c.append(f"    case {m.api_key}:")
        c.append(f"      if (version < {m.valid[0]} || version > {m.valid[1]}) return false;")
        c.append(f"      {ScanGen(m).fn(m.top)}(r, version, 0, out);")
        c.append("      break;")
    c += ["    default:", "      return false;", "  }", "  return r.ok() && r.at_end();", "}", "",
          "}  // namespace kproxy::codec"]
    out.add("codec/response_scan.cc", c)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schema", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chunks", type=int, default=6)
    ap.add_argument("--test-chunks", type=int, default=3)
    ap.add_argument("--list-outputs", action="store_true")
    args = ap.parse_args()
    with open(args.schema) as fh:
        doc = json.load(fh)
    for key in ("kafka_version", "messages", "errors"):
        if key not in doc:
            raise GenError(f"{args.schema}: missing {key!r}")
    schema_rel = "codec/gen/" + os.path.basename(args.schema)
    all_msgs = [MessageDef(m) for m in doc["messages"]]
    reqs = {m.api_key: m for m in all_msgs if m.kind == "request"}
    resps = {m.api_key: m for m in all_msgs if m.kind == "response"}
    if set(reqs) != set(resps):
        raise GenError("request and response api keys differ: " + str(sorted(set(reqs) ^ set(resps))))
    names = [m.name for m in all_msgs]
    if len(set(names)) != len(names):
        raise GenError("duplicate message names")
    if not {"RequestHeader", "ResponseHeader"} <= set(names):
        raise GenError("schema lacks RequestHeader/ResponseHeader")
    msgs = [m for m in all_msgs if not m.removed]
    out = Output(args.out, schema_rel)
    gen_api_keys(out, reqs, resps)
    gen_errors(out, doc["errors"])
    gen_messages(out, msgs, args.chunks)
    gen_testing(out, msgs, args.test_chunks)
    gen_response_scan(out, msgs)
    if args.list_outputs:
        for rel in sorted(out.files):
            print(rel)
        return
    out.write()


if __name__ == "__main__":
    try:
        main()
    except GenError as e:
        sys.exit(f"generate.py: error: {e}")
