"""The model: kproxy's reading of the facts-only schema (kafka-<version>-messages.json).

Parses and checks every message strictly (anything the generator does not understand stops it),
names the C++ structs and members, gives each field its C++ type and default, and works out which
structs hold error codes and entities. Emitters read the model; none of them parses the schema.
"""

import re

from cpp import cond, cpp_string
from wire import SCALARS, VARIABLE

INT_RANGES = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
              "int64": (-2**63, 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1)}
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


# ---------------------------------------------------------------------------------------------
# Model

class Field:
    def __init__(self, msg, owner, spec, valid, top):
        self.msg = msg
        self.owner = owner  # struct name
        self.top_level = top
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


    # -- how the emitters see it
    def null_cond(self):
        """C++ condition: the version allows null here ("false" for a field never nullable)."""
        return cond(self.nullable, intersect(self.versions, self.msg.valid)) if self.nullable_any else "false"

    def flex_var(self):
        """The C++ flag that says whether this field is encoded compact (flexible)."""
        return "false" if self.flexible_override == "none" else "flexible_"

    def label(self):
        """How errors name the field: "Field" at the top level, "Struct.Field" below."""
        return self.name if self.top_level else f"{self.owner}.{self.name}"

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

    def is_top(self):
        return self is self.msg.top

    def tags_label(self):
        """How errors name the struct's tagged-field section."""
        return "_tagged_fields" if self.is_top() else f"{self.name}._tagged_fields"

    def qualified(self):
        """The C++ name outside the message: `Msg` or `Msg::Struct`."""
        return self.msg.cpp_name if self.is_top() else f"{self.msg.cpp_name}::{self.name}"

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

