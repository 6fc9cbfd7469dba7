// tools: `dsv4` entry point — dispatches to the registered subcommands.
#include <cstdio>
#include <cstring>
#include <string>

#include "command.h"

namespace dsv4::cli {
std::map<std::string, Command>& command_table() {
  static std::map<std::string, Command> table;
  return table;
}
}  // namespace dsv4::cli

static void print_usage() {
  std::printf("usage: dsv4 <command> [options]\n\ncommands:\n");
  for (const auto& [name, cmd] : dsv4::cli::command_table()) std::printf("  %-16s %s\n", name.c_str(), cmd.summary.c_str());
  std::printf("\nRun `dsv4 <command> --help` for a command's options.\n");
}

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  auto& table = dsv4::cli::command_table();
  auto it = table.find(argv[1]);
  if (it == table.end()) {
    std::fprintf(stderr, "dsv4: unknown command '%s'\n\n", argv[1]);
    print_usage();
    return 2;
  }
  return it->second.fn(argc - 1, argv + 1);
}
