"""Emits the test instances, under codec/generated/testing/: fill.h, fill_<i>.cc (one `fill`
per struct) and make_instance.cc. Library kproxy_codec_testing, never in the daemon."""

from cpp import cond, func, indent_lines, when
from wire import code_for


def fill_body(s):
    """Fills x field by field; tagged fields and unknown tags only for random instances."""
    msg = s.msg
    qual = f"{msg.cpp_name}::"
    out = []
    for f in s.regular:
        out += when(cond(f.versions, msg.valid), code_for(f).fill(f"x.{f.member}", qual, False))
    for f in s.tagged:
        body = ["if (!f.smallest()) {"] + indent_lines(code_for(f).fill(f"x.{f.member}", qual, True)) + ["}"]
        out += when(cond(f.tagged_versions, msg.valid), body)
    flex = msg.flexible_cond()
    if flex != "false":
        tags = ", ".join(str(f.tag) for f in s.tagged)
        out += when(flex, [f"f.unknown_tags(x.unknown_tagged_fields, {{{tags}}});"])
    return out


def emit(out, msgs, chunks):
    h = ["// Smallest and random instances of every generated message, for tests (not in the daemon).",
         "#pragma once", "", "#include <cstdint>", "#include <memory>", "", '#include "codec/generated/messages.h"',
         '#include "codec/testing/filler.h"', "", "namespace kproxy::codec::testing {", ""]
    for m in msgs:
        for s in m.order:
            h.append(f"void fill(Filler& f, {s.qualified()}& x, int16_t version);")
    h += ["",
          "/// A message for (api_key, request?, version) filled by `f`, or nullptr for an unknown key.",
          "std::unique_ptr<Message> make_instance(int16_t api_key, bool request, int16_t version, Filler& f);", "",
          "}  // namespace kproxy::codec::testing"]
    out.add("codec/generated/testing/fill.h", h)
    mu = "[[maybe_unused]] "
    for i in range(chunks):
        c = ['#include "codec/generated/testing/fill.h"', "", "namespace kproxy::codec::testing {", ""]
        for m in msgs[i::chunks]:
            for s in m.order:
                c += func(f"void fill({mu}Filler& f, {mu}{s.qualified()}& x, {mu}int16_t version)",
                          fill_body(s) or ["(void)x;"])
        c.append("}  // namespace kproxy::codec::testing")
        out.add(f"codec/generated/testing/fill_{i}.cc", c)
    c = ['#include "codec/generated/testing/fill.h"', "", "namespace kproxy::codec::testing {", "",
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
    out.add("codec/generated/testing/make_instance.cc", c)
