#include "proxy/util/glob.h"

#include "proxy/util/utf8.h"

namespace kproxy::util {

namespace {
// Matches a class starting after '['; sets `end` past the closing ']'.
bool class_match(std::string_view p, size_t& i, char c, bool& ok) {
  bool negate = false;
  if (i < p.size() && (p[i] == '!' || p[i] == '^')) {
    negate = true;
    ++i;
  }
  bool matched = false;
  bool first = true;
  while (i < p.size() && (first || p[i] != ']')) {
    first = false;
    char lo = p[i];
    if (lo == '\\' && i + 1 < p.size()) lo = p[++i];
    char hi = lo;
    if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
      // A range's end is read like any element: `\` escapes it (`[!-\]]` is '!' to ']').
      i += 2;
      hi = p[i];
      if (hi == '\\' && i + 1 < p.size()) hi = p[++i];
    }
    if (c >= lo && c <= hi) matched = true;
    ++i;
  }
  if (i >= p.size()) {
    ok = false;
    return false;
  }
  ++i;  // ']'
  return matched != negate;
}
}  // namespace

std::string glob_error(std::string_view p) {
  if (size_t length = code_points(p); length > kMaxGlobLength) {
    return "glob '" + std::string(p.substr(0, 40)) + "…' is " + std::to_string(length) + " characters long (at most " +
           std::to_string(kMaxGlobLength) + ")";
  }
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\') {
      if (i + 1 >= p.size()) return "glob '" + std::string(p) + "' ends with a lone '\\'";
      ++i;
    } else if (p[i] == '[') {
      size_t j = i + 1;
      bool ok = true;
      class_match(p, j, 'a', ok);
      if (!ok) return "glob '" + std::string(p) + "' has an unclosed '[' at offset " + std::to_string(i);
      i = j - 1;
    }
  }
  return "";
}

bool glob_match(std::string_view p, std::string_view t) {
  // Iterative matching with one backtrack point (the last '*'): linear in practice.
  size_t pi = 0, ti = 0, star_p = std::string_view::npos, star_t = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star_p = ++pi;
      star_t = ti;
      continue;
    }
    if (pi < p.size()) {
      bool same = false;
      size_t next = pi + 1;
      if (p[pi] == '?') {
        same = true;
      } else if (p[pi] == '[') {
        size_t j = pi + 1;
        bool ok = true;
        bool m = class_match(p, j, t[ti], ok);
        if (ok) {
          same = m;
          next = j;
        } else {
          same = t[ti] == '[';
        }
      } else if (p[pi] == '\\' && pi + 1 < p.size()) {
        same = p[pi + 1] == t[ti];
        next = pi + 2;
      } else {
        same = p[pi] == t[ti];
      }
      if (same) {
        pi = next;
        ++ti;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    pi = star_p;
    ti = ++star_t;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace kproxy::util
