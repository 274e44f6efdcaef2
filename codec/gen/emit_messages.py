"""Emits the message structs, under codec/generated/: messages/<api>.h (declarations),
messages.h (includes them all), messages_<i>.cc (method bodies, several APIs per file) and
message_factory.cc (make_request / make_response)."""

from cpp import cond, cpp_string, func, indent_lines, when
from wire import code_for, on_each, tag_section

MU = "[[maybe_unused]] "


def present(f, lines, versions=None):
    """lines, guarded by the versions where field f is on the wire."""
    return when(cond(versions or f.versions, f.msg.valid), lines)


def has_tag(f):
    """C++ boolean: tagged field f is written (present at the version and not its default)."""
    c = cond(f.tagged_versions, f.msg.valid)
    return f"{'' if c == 'true' else f'({c}) && '}{code_for(f).non_default(f.member)}"


def tag_payload(f):
    """Statements that size tagged field f into payload_."""
    return ["size_t payload_ = 0;"] + code_for(f).size(f.member, "true", "payload_")


def flexible_flag(s):
    return f"[[maybe_unused]] const bool flexible_ = {s.msg.flexible_cond()};"


# ---------------------------------------------------------------------------------------------
# Method bodies of one struct

def read_body(s):
    msg = s.msg
    out = []
    if s.is_top():
        out.append(f"*this = {s.name}{{}};")
        out.append("r.set_message(kName, version);")
    flex = msg.flexible_cond()
    out.append(flexible_flag(s))
    for f in s.regular:
        out += present(f, [f"r.set_field({cpp_string(f.label())});"] + code_for(f).read(f.member, f.flex_var()))
    if flex != "false":
        cases = [(f.tag, cond(f.tagged_versions, msg.valid),
                  [f"r.set_field({cpp_string(f.label())});"] + code_for(f).read(f.member, "true") +
                  ["check_tag_end(r, tag_end_);", f"r.set_field({cpp_string(s.tags_label())});", "continue;"])
                 for f in s.tagged]
        out += when(flex, tag_section(cases, ["unknown_tagged_fields.push_back({tag_, r.raw(tag_size_)});"],
                                      before=[f"r.set_field({cpp_string(s.tags_label())});"]))
    return out


def write_body(s):
    flex = s.msg.flexible_cond()
    out = [flexible_flag(s)]
    for f in s.regular:
        out += present(f, code_for(f).write(f.member, f.flex_var()))
    if flex != "false":
        body = [f"const bool has_tag{i}_ = {has_tag(f)};" for i, f in enumerate(s.tagged)]
        body.append("w.uvarint(static_cast<uint32_t>(unknown_tagged_fields.size()"
                    + "".join(f" + has_tag{i}_" for i in range(len(s.tagged))) + "));")
        if s.tagged:
            body.append("size_t next_unknown_ = 0;")
            for i, f in enumerate(s.tagged):
                body.append(f"next_unknown_ = write_unknown_tags_below(w, unknown_tagged_fields, next_unknown_, {f.tag});")
                body.append(f"if (has_tag{i}_) {{")
                body += indent_lines(tag_payload(f) + [f"w.uvarint({f.tag});", "w.uvarint(static_cast<uint32_t>(payload_));"]
                                     + code_for(f).write(f.member, "true"))
                body.append("}")
        body.append(f"write_unknown_tags_from(w, unknown_tagged_fields, {'next_unknown_' if s.tagged else '0'});")
        out += when(flex, body)
    return out


def size_body(s):
    flex = s.msg.flexible_cond()
    out = ["size_t n = 0;", flexible_flag(s)]
    for f in s.regular:
        out += present(f, code_for(f).size(f.member, f.flex_var(), "n"))
    if flex != "false":
        body = ["uint32_t tag_count_ = static_cast<uint32_t>(unknown_tagged_fields.size());",
                "for (const auto& u_ : unknown_tagged_fields) n += tagged_field_size(u_.tag, u_.data.size());"]
        for f in s.tagged:
            body.append(f"if ({has_tag(f)}) {{")
            body += indent_lines(tag_payload(f) + [f"n += tagged_field_size({f.tag}, payload_);", "++tag_count_;"])
            body.append("}")
        body.append("n += uvarint_size(tag_count_);")
        out += when(flex, body)
    out.append("return n;")
    return out


def json_body(s):
    out = ["out = nlohmann::json::object();"]
    for f in s.fields:
        out += present(f, code_for(f).json(f.member, cpp_string(f.name)))
    out.append("if (!unknown_tagged_fields.empty()) out[\"_unknown_tagged_fields\"] = json_unknown_tags(unknown_tagged_fields);")
    return out


def is_default_body(s):
    conds = [code_for(f).non_default(f.member) for f in s.fields]
    conds.append("!unknown_tagged_fields.empty()")
    return ["return !(" + " ||\n           ".join(conds) + ");"]


def unsupported_body(s):
    """Kafka's write-time checks: a non-ignorable field absent at the version must hold its
    default (Java: UnsupportedVersionException), and null only where the version allows it."""
    out = []
    for f in s.fields:
        pres = cond(f.tagged_versions if f.tagged else f.versions, s.msg.valid)
        label = cpp_string(f.label())
        if not f.ignorable and pres != "true":
            c = code_for(f).non_default(f.member)
            out.append(f"if (!({pres}) && {c}) return {label};" if pres != "false" else f"if ({c}) return {label};")
        if f.optional() and f.base != "records" and not f.tagged and f.null_cond() != "true":
            out += when(pres, [f"if (!({f.null_cond()}) && !{f.member}.has_value()) return {label};"])
        if f.is_struct:
            out += when(pres, [on_each(f, f.member, lambda v, acc:
                                       f"if (const char* bad_ = {acc}unsupported_field(version)) return bad_;")])
    out.append("return nullptr;")
    return out


def errors_body(s):
    out = []
    for f in s.fields:
        role = f.scope_role(s.name)
        if role is not None:
            out += present(f, [on_each(f, f.member, lambda v, acc: f"scope.{role} = {v};")])
    holds_errors = [f for f in s.fields if f.is_struct and s.msg.structs[f.base].has_errors]
    if holds_errors:
        out.append("ErrorScope inner = scope;")
        out.append("++inner.depth;")
    for f in s.fields:
        if f.is_error_code():
            out += present(f, [f"scope.field = {cpp_string(f.name)};", f"visit({f.member}, scope);"])
        elif f in holds_errors:
            out += present(f, [on_each(f, f.member, lambda v, acc: f"{acc}visit_errors(version, visit, inner);",
                                       const=False)])
    return out


# How an entity value is passed to EntityVisitor(kind, string, number), by schema type.
ENTITY_ARGS = {
    "string": lambda v: f"{v}, 0",
    "uuid": lambda v: f"std::string_view(reinterpret_cast<const char*>({v}.data()), {v}.size()), 0",
}


def entities_body(s):
    out = []
    for f in s.fields:
        kind = f.entity_kind()
        body = []
        if kind:
            args = ENTITY_ARGS.get(f.base, lambda v: f"{{}}, {v}")
            body = [on_each(f, f.member, lambda v, acc: f"visit(EntityKind::{kind}, {args(v)});")]
        elif f.is_struct and s.msg.structs[f.base].has_entities:
            body = [on_each(f, f.member, lambda v, acc: f"{acc}visit_entities(version, visit);")]
        # A versioned field without entities leaves an empty `if` (kept: the output is unchanged).
        out += present(f, body)
    return out


# ---------------------------------------------------------------------------------------------
# Declarations and definitions

def struct_decl(msg, s, indent):
    top = s.is_top()
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
        lines.append("  int16_t api_key() const override { return kApiKey; }")
        lines.append(f"  bool is_request() const override {{ return {'true' if msg.kind == 'request' else 'false'}; }}")
        lines.append("  const char* name() const override { return kName; }")
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


def struct_defs(msg, s):
    q = s.qualified()
    out = []
    out += func(f"void {q}::read({MU}Reader& r, {MU}int16_t version)", read_body(s))
    out += func(f"void {q}::write({MU}Writer& w, {MU}int16_t version) const", write_body(s))
    out += func(f"size_t {q}::size({MU}int16_t version) const", size_body(s))
    out += func(f"void {q}::to_json(nlohmann::json& out, {MU}int16_t version) const", json_body(s))
    out += func(f"const char* {q}::unsupported_field({MU}int16_t version) const", unsupported_body(s))
    if s.needs_is_default:
        out += func(f"bool {q}::is_default() const", is_default_body(s))
    if s.has_errors:
        out += func(f"void {q}::visit_errors({MU}int16_t version, const ErrorCodeVisitor& visit, ErrorScope scope)",
                    errors_body(s))
    if s.has_entities:
        out += func(f"void {q}::visit_entities({MU}int16_t version, const EntityVisitor& visit) const",
                    entities_body(s))
    if s.is_top():
        unused = ["(void)version;", "(void)visit;"]
        body = ["visit_errors(version, visit, ErrorScope{});"] if s.has_errors else unused
        out += func(f"void {q}::for_each_error_code(int16_t version, const ErrorCodeVisitor& visit)", body)
        body = ["visit_entities(version, visit);"] if s.has_entities else unused
        out += func(f"void {q}::for_each_entity(int16_t version, const EntityVisitor& visit) const", body)
        t = throttle_field(msg)
        if t:
            c = cond(t.versions, msg.valid)
            body = [f"return &{t.member};"] if c == "true" else [f"return {c} ? &{t.member} : nullptr;"] if c != "false" else ["return nullptr;"]
            out += func(f"int32_t* {q}::throttle_time({MU}int16_t version)", body)
    return out


def factory_switch(name, cases):
    """`std::unique_ptr<Message> name(int16_t api_key)`: a switch over (key, expression) pairs."""
    return [f"std::unique_ptr<Message> {name}(int16_t api_key) {{", "  switch (api_key) {"] + \
        [f"    case {k}: return {e};" for k, e in cases] + ["    default: return nullptr;", "  }", "}", ""]


def emit(out, msgs, chunks):
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
        out.add(f"codec/generated/messages/{hname}.h", h)
    names = sorted(groups)
    out.add("codec/generated/messages.h", ["// Every Kafka request, response and header message kproxy knows.", "#pragma once", ""] +
            [f'#include "codec/generated/messages/{n}.h"' for n in names])
    # Implementation chunks, balanced by rough size.
    weights = sorted(((sum(len(m.order) + sum(len(s.fields) for s in m.order) for m in groups[n]), n) for n in names), reverse=True)
    bins = [[0, []] for _ in range(chunks)]
    for w, n in weights:
        b = min(bins, key=lambda b: b[0])
        b[0] += w
        b[1].append(n)
    chunk_of = {}
    for i, (_, ns) in enumerate(bins):
        ms = [m for n in sorted(ns) for m in groups[n]]
        c = ["#include <bit>", "#include <memory>", "#include <nlohmann/json.hpp>", "", '#include "codec/message_support.h"']
        c += [f'#include "codec/generated/messages/{n}.h"' for n in sorted(ns)]
        c += ["", "namespace kproxy::codec {", ""]
        for m in ms:
            for s in m.order:
                c += struct_defs(m, s)
        # Factories for this chunk's messages: instantiating every message's destructor in one
        # file would cost as much as a chunk, here it is already instantiated.
        for kind in ("request", "response"):
            c += factory_switch(f"make_{kind}_{i}",
                                [(m.api_key, f"std::make_unique<{m.cpp_name}>()") for m in ms if m.kind == kind])
        c.append("}  // namespace kproxy::codec")
        out.add(f"codec/generated/messages_{i}.cc", c)
        chunk_of.update((m.api_key, i) for m in ms if m.kind in ("request", "response"))
    # Factories: dispatch to the chunk that holds the key.
    c = ['#include <memory>', "", '#include "codec/message.h"', "", "namespace kproxy::codec {", ""]
    for kind in ("request", "response"):
        for i in range(chunks):
            c.append(f"std::unique_ptr<Message> make_{kind}_{i}(int16_t api_key);")
    c.append("")
    for kind in ("request", "response"):
        c += factory_switch(f"make_{kind}", [(k, f"make_{kind}_{chunk_of[k]}(api_key)") for k in sorted(chunk_of)])
    c.append("}  // namespace kproxy::codec")
    out.add("codec/generated/message_factory.cc", c)
