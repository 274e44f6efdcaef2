// kproxy-config-keys: prints the key table config/README.md shows, made from config_keys()
// (config/config_keys.h); with --write FILE, replaces the table in FILE instead
// (scripts/config-keys-table runs it on config/README.md).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "config/config_keys.h"

int main(int argc, char** argv) {
  if (argc == 1) {
    std::cout << kproxy::config::config_keys_markdown();
    return 0;
  }
  if (argc != 3 || std::string_view(argv[1]) != "--write") {
    std::cerr << "usage: kproxy-config-keys [--write FILE]\n";
    return 2;
  }
  std::ifstream in(argv[2]);
  if (!in) {
    std::cerr << argv[2] << ": cannot read\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  in.close();
  auto updated = kproxy::config::with_key_table(text.str());
  if (!updated) {
    std::cerr << argv[2] << ": no line '| key | default | meaning |'\n";
    return 1;
  }
  if (*updated == text.str()) return 0;
  std::ofstream out(argv[2], std::ios::trunc);
  out << *updated;
  if (!out) {
    std::cerr << argv[2] << ": cannot write\n";
    return 1;
  }
  std::cerr << argv[2] << ": key table rewritten\n";
  return 0;
}
