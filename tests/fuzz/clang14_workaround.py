#!/usr/bin/env python3
"""Copies a generated codec source, rewriting `X.emplace()` on std::optional members for clang 14.

clang 14 evaluates std::is_constructible<Nested> while the enclosing message struct is still
incomplete (the nested struct's default member initializers are not parsed yet), caches `false`,
and then refuses `optional<Nested>::emplace()` in the generated .cc files. Assigning a
value-initialized T instead needs only T's move constructor, which is checked later and passes.
The generated code is otherwise unchanged; with a compiler without the bug this is a no-op in
meaning. Used only by the fuzz build (tests/fuzz/CMakeLists.txt).

usage: clang14_workaround.py IN OUT
"""
import re
import sys

src, dst = sys.argv[1], sys.argv[2]
text = open(src, encoding="utf-8").read()
ident = r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
# X.emplace().member  ->  (X = T{})->member
text = re.sub(ident + r"\.emplace\(\)\.", r"(\1 = std::remove_cvref_t<decltype(*\1)>{})->", text)
# X.emplace()  ->  *(X = T{})
text = re.sub(ident + r"\.emplace\(\)", r"(*(\1 = std::remove_cvref_t<decltype(*\1)>{}))", text)
text = "#include <type_traits>\n" + text
with open(dst, "w", encoding="utf-8") as f:
    f.write(text)
