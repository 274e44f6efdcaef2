"""Field types: the one place that knows how each schema type is read, written, sized, skipped
(response scan), filled (test instances), shown as JSON and compared with its default.

`code_for(field)` picks a field's type object (the only dispatch on types); the emitters ask it for
C++ statements and never look at the type themselves. Each type says how one present, non-null
value is handled (`plain_*`); the base class and Array add nullability and repetition once for all.
Arguments: `x` is the C++ member (an lvalue), `flex` the C++ flag for compact encoding, `n` the
size accumulator.
"""

from cpp import block, braces, indent_lines, when, when_null

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
VARIABLE = {"string", "bytes", "records"}

NULL_ARRAY = 'r.fail("null array in a non-nullable field");'


def code_for(f):
    """The type object of field f."""
    if f.is_array:
        return Array(f, _element(f))
    return _element(f)


def _element(f):
    if f.is_struct:
        return StructType(f)
    if f.base == "records":
        return Records(f)
    if f.base in VARIABLE:
        return Variable(f)
    return Scalar(f)


def scan_function(struct):
    """The response scanner's function for one struct (codec/generated/response_scan.cc)."""
    return f"scan_{struct.msg.cpp_name}_{struct.name}"


def on_each(f, x, stmt, const=True):
    """stmt(value, accessor) for the value of member x: each element of an array, else the value
    itself; guarded by `if (x)` where the member is optional."""
    guard = f"if ({x}) " if f.optional() else ""
    if f.is_array:
        src = f"*{x}" if f.optional() else x
        return guard + f"for ({'const ' if const else ''}auto& item_ : {src}) " + stmt("item_", "item_.")
    if f.optional():
        return guard + stmt(f"*{x}", f"{x}->")
    return stmt(x, f"{x}.")


def tag_section(cases, tail, before=(), each=()):
    """Reads a tagged-field section: `before`, then per tag its header and `each`, then the
    statements of a known tag (cases: (tag, C++ condition, lines)), else `tail`."""
    body = ["uint32_t tag_ = 0;",
            "uint32_t tag_size_ = 0;",
            "if (!read_tag_header(r, tag_, tag_size_)) break;"] + list(each)
    if cases:
        body.append("const size_t tag_end_ = r.offset() + tag_size_;")
        body.append("switch (tag_) {")
        for tag, c, lines in cases:
            body.append(f"  case {tag}:")
            body += when(c, lines, "    ")
            if c != "true":
                body.append("    break;")
        body += ["  default:", "    break;", "}"]
    body += tail
    return list(before) + ["const uint32_t tag_count_ = read_tag_count(r);"] + \
        block("for (uint32_t i_ = 0; i_ < tag_count_ && r.ok(); ++i_)", body)


class FieldType:
    width = None  # bytes of one value, for fixed-width types
    block = False  # arrays of it are read and written as one block

    def __init__(self, f):
        self.f = f
        self.nv = f.null_cond()  # C++: the version allows null

    # -- one field (nullable types override read/write/size/scan)
    def read(self, x, flex):
        return [self.plain_read(x, flex)]

    def write(self, x, flex):
        return [self.plain_write(x, flex)]

    def size(self, x, flex, n):
        return [f"{n} += {self.plain_size(x, flex)};"]

    def scan(self, flex):
        return self.plain_scan(flex)

    def fill(self, x, prefix, tagged):
        """A test value for x (null where the version allows it and the Filler says so)."""
        lines = self.fill_value(x, prefix, tagged)
        if self.nv == "false":
            return lines
        guard = "f.null()" if self.nv == "true" else f"({self.nv}) && f.null()"
        return [f"if ({guard}) {{", f"  {x} = std::nullopt;", "} else {"] + indent_lines(lines) + ["}"]

    def fill_value(self, x, prefix, tagged):
        return [self.plain_fill(x, prefix)]

    def json(self, x, key):
        if self.f.optional():
            return [f"if ({x}) out[{key}] = {self.json_expr('*' + x)}; else out[{key}] = nullptr;"]
        return [f"out[{key}] = {self.json_expr(x)};"]

    def non_default(self, x):
        """C++ boolean: member x differs from its default (tagged fields equal to it are omitted)."""
        f = self.f
        if f.optional() and f.default_is_null():
            return f"{x}.has_value()"
        if f.optional():
            return f"(!{x} || {self.differs(f'*{x}', f'{x}->')})"
        return self.differs(x, f"{x}.")

    # -- elements of an array
    def read_item(self, flex):
        return f"items_.push_back({self.read_expr(flex)});"

    def fill_item(self):
        return f"items_.push_back({self.fill_expr()});"

    def json_item(self):
        return f"items_.push_back({self.json_expr('item_')});"

    # -- a value type (scalars, strings, bytes) reads, fills and compares as an expression
    def plain_read(self, x, flex):
        return f"{x} = {self.read_expr(flex)};"

    def plain_fill(self, x, prefix):
        return f"{x} = {self.fill_expr()};"


class Scalar(FieldType):
    def __init__(self, f):
        super().__init__(f)
        _, self.width, self.reader, self.writer, self.filler = SCALARS[f.base]
        self.block = f.base in FIXED_WIDTH_ARRAY_BASES

    def read_expr(self, flex):
        return self.reader

    def plain_write(self, v, flex):
        return f"{self.writer}({v});"

    def plain_size(self, v, flex):
        return str(self.width)

    def plain_scan(self, flex):
        if self.f.is_error_code():
            return ["{", "  const size_t at_ = r.offset();", "  const int16_t code_ = r.int16();",
                    "  if (code_ != 0 && r.ok()) out.add_error(code_, at_, depth);", "}"]
        return [f"r.skip({self.width});"]

    def fill_expr(self):
        return self.filler

    def json_expr(self, v):
        if self.f.base == "uuid":
            return f"json_uuid({v})"
        if self.f.base == "int8":
            return f"static_cast<int>({v})"
        return v

    def differs(self, v, acc):
        base, d = self.f.base, self.f.default_expr()
        if base == "uuid":
            return f"{v} != Uuid{{}}"
        if base == "bool":
            return f"{v} != {d or 'false'}"
        if base == "float64":
            return f"std::bit_cast<uint64_t>({v}) != std::bit_cast<uint64_t>(double{{{d or '0.0'}}})"
        return f"{v} != {d or '0'}"


class Variable(FieldType):
    """string and bytes: a length-prefixed view, nullable in some versions."""

    def __init__(self, f):
        super().__init__(f)
        self.fn = "string" if f.base == "string" else "bytes"
        self.prefix_size = "string_prefix_size" if f.base == "string" else "bytes_prefix_size"
        self.null_width = 2 if f.base == "string" else 4  # the int16 / int32 -1 of a null
        self.empty = "std::string_view{}" if f.base == "string" else "Bytes{}"
        self.wire_nv = self.nv  # where the encoding is nullable

    def read(self, x, flex):
        return [when_null(self.wire_nv, f"{x} = r.nullable_{self.fn}({flex});", self.plain_read(x, flex))]

    def write(self, x, flex):
        plain = self.plain_write(f"{x}.value_or({self.empty})" if self.f.optional() else x, flex)
        return [when_null(self.wire_nv, f"w.nullable_{self.fn}({x}, {flex});", plain)]

    def size(self, x, flex, n):
        if self.wire_nv == "false":
            return super().size(x, flex, n)
        present, null = self.sized(f"{x}->", flex), f"null_prefix_size({flex}, {self.null_width})"
        if self.wire_nv == "true":
            return [f"{n} += {x} ? {present} : {null};"]
        return [f"if ({x}) {n} += {present};",
                f"else {n} += {when_null(self.wire_nv, null, f'{self.prefix_size}(0, {flex})', expr=True)};"]

    def scan(self, flex):
        return [when_null(self.wire_nv, f"r.nullable_{self.fn}({flex});", self.plain_scan(flex)[0])]

    def read_expr(self, flex):
        return f"r.{self.fn}({flex})"

    def plain_write(self, v, flex):
        return f"w.{self.fn}({v}, {flex});"

    def sized(self, acc, flex):
        return f"{self.prefix_size}({acc}size(), {flex}) + {acc}size()"

    def plain_size(self, v, flex):
        return self.sized(f"{v}.", flex)

    def plain_scan(self, flex):
        return [f"r.{self.fn}({flex});"]

    def fill_expr(self):
        return f"f.{self.fn}()"

    def json_expr(self, v):
        return f"std::string({v})" if self.f.base == "string" else f"json_bytes({v})"

    def differs(self, v, acc):
        d = self.f.default_expr() if self.f.base == "string" else None
        return f"{v} != {d}" if d else f"!{acc}empty()"


class Records(Variable):
    """records: always std::optional<Bytes> and always encoded as nullable bytes (a view)."""

    def __init__(self, f):
        super().__init__(f)
        self.wire_nv = "true"  # test instances still honour the schema's nullableVersions

    def json(self, x, key):
        return [f"out[{key}] = json_records({x});"]


class StructType(FieldType):
    """A nested struct; nullable ones carry Kafka's int8 -1/1 marker where the version allows null."""

    def __init__(self, f):
        super().__init__(f)
        self.struct = f.msg.structs[f.base]

    def read(self, x, flex):
        if not self.f.optional():
            return super().read(x, flex)
        present = f"{self.f.engage(x)}->read(r, version);"
        if self.nv == "true":
            return [f"if (r.int8() < 0) {x}.reset(); else {present}"]
        return [f"if (!({self.nv})) {present}", f"else if (r.int8() < 0) {x}.reset();", f"else {present}"]

    def write(self, x, flex):
        if not self.f.optional():
            return super().write(x, flex)
        marked = f"  if (!{x}) {{ w.int8(-1); }} else {{ w.int8(1); {x}->write(w, version); }}"
        if self.nv == "true":
            return ["{", marked, "}"]
        return [f"if ({self.nv}) {{", marked, "} else {",
                f"  if ({x}) {x}->write(w, version); else {self.f.base}{{}}.write(w, version);", "}"]

    def size(self, x, flex, n):
        if not self.f.optional():
            return super().size(x, flex, n)
        marked = f"{n} += 1 + ({x} ? {x}->size(version) : 0);"
        if self.nv == "true":
            return [marked]
        return [f"if ({self.nv}) {marked}", f"else {n} += {x} ? {x}->size(version) : {self.f.base}{{}}.size(version);"]

    def scan(self, flex):
        call = self.plain_scan(flex)[0]
        if not self.f.optional():
            return [call]
        if self.nv == "true":
            return [f"if (r.int8() >= 0) {call}"]
        return [f"if (!({self.nv}) || r.int8() >= 0) {call}"]

    def fill_value(self, x, prefix, tagged):
        return [self.plain_fill("*" + self.f.engage(x, prefix) if self.f.optional() else x, prefix)]

    def json(self, x, key):
        if self.f.optional():
            return [f"if ({x}) {x}->to_json(out[{key}], version); else out[{key}] = nullptr;"]
        return [f"{x}.to_json(out[{key}], version);"]

    def differs(self, v, acc):
        return f"!{acc}is_default()"

    def plain_read(self, x, flex):
        return f"{x}.read(r, version);"

    def plain_write(self, v, flex):
        return f"{v}.write(w, version);"

    def plain_size(self, v, flex):
        return f"{v}.size(version)"

    def plain_scan(self, flex):
        return [f"{scan_function(self.struct)}(r, version, depth + 1, out);"]

    def plain_fill(self, x, prefix):
        return f"fill(f, {x}, version);"

    def read_item(self, flex):
        return self.plain_read("items_.emplace_back()", flex)

    def fill_item(self):
        return self.plain_fill("items_.emplace_back()", "")

    def json_item(self):
        return "{ nlohmann::json j; item_.to_json(j, version); items_.push_back(std::move(j)); }"


class Array(FieldType):
    """[]T: an int32 (or compact uvarint) count, then the elements; nullable in some versions."""

    def __init__(self, f, elem):
        super().__init__(f)
        self.elem = elem

    def _null_or(self, x, null, present):
        """`if (!x) { null } else { present }` for an optional member, else just present; present
        takes the member's accessor (x-> / x.) and value (*x / x)."""
        if not self.f.optional():
            return present(f"{x}.", x)
        return [f"if (!{x}) {{", "  " + null, "} else {"] + indent_lines(present(f"{x}->", f"*{x}")) + ["}"]

    def read(self, x, flex):
        if self.f.optional():
            null = [when_null(self.nv, f"{x}.reset();", NULL_ARRAY)]
            items = [f"auto& items_ = *{self.f.engage(x)};"]
        else:
            null = [NULL_ARRAY]
            items = [f"auto& items_ = {x};", "items_.clear();"]
        if self.elem.block:
            # One bounds check and one allocation for the whole block (partition lists).
            items.append("r.fixed_array(items_, static_cast<size_t>(count_));")
        else:
            items.append("items_.reserve(reserve_hint(count_));")
            items += block("for (int32_t i_ = 0; i_ < count_ && r.ok(); ++i_)", [self.elem.read_item(flex)])
        body = [f"const int32_t count_ = r.array_length({flex});"] + \
            block("if (count_ < 0)", null, "} else {") + indent_lines(items) + ["}"]
        return braces(body)

    def write(self, x, flex):
        def present(acc, v):
            each = f"w.fixed_array({v});" if self.elem.block else \
                f"for (const auto& item_ : {v}) {self.elem.plain_write('item_', flex)}"
            return [f"w.array_length(static_cast<int32_t>({acc}size()), {flex});", each]
        return self._null_or(x, f"w.array_length({when_null(self.nv, '-1', '0', expr=True)}, {flex});", present)

    def size(self, x, flex, n):
        def present(acc, v):
            each = f"{n} += ({v}).size() * {self.elem.width};" if self.elem.width else \
                f"for (const auto& item_ : {v}) {n} += {self.elem.plain_size('item_', flex)};"
            return [f"{n} += array_prefix_size({acc}size(), {flex});", each]
        null = when_null(self.nv, f"null_prefix_size({flex}, 4)", f"array_prefix_size(0, {flex})", expr=True)
        return self._null_or(x, f"{n} += {null};", present)

    def scan(self, flex):
        out = ["{", f"  const int32_t count_ = r.array_length({flex});"]
        if not self.f.optional():
            out.append(f"  if (count_ < 0) {NULL_ARRAY}")
        elif self.nv != "true":
            out.append(f"  if (count_ < 0 && !({self.nv})) {NULL_ARRAY}")
        each = f"if (count_ > 0) r.skip(static_cast<size_t>(count_) * {self.elem.width});" if self.elem.width else \
            f"for (int32_t i_ = 0; i_ < count_ && r.ok(); ++i_) {self.elem.plain_scan(flex)[0]}"
        return out + ["  " + each, "}"]

    def fill_value(self, x, prefix, tagged):
        items = "*" + self.f.engage(x, prefix) if self.f.optional() else x
        body = [f"auto& items_ = {items};"] + \
            block(f"for (size_t i_ = 0, count_ = f.count({'true' if tagged else 'false'}); i_ < count_; ++i_)",
                  [self.elem.fill_item()])
        return braces(body)

    def json(self, x, key):
        each = [f"for (const auto& item_ : {'*' + x if self.f.optional() else x}) {self.elem.json_item()}"]
        if self.f.optional():
            items = block(f"if ({x})", each, "} else {") + ["  items_ = nullptr;", "}"]
        else:
            items = braces(each)
        body = ["nlohmann::json items_ = nlohmann::json::array();"] + items + [f"out[{key}] = std::move(items_);"]
        return braces(body)

    def differs(self, v, acc):
        return f"!{acc}empty()"
