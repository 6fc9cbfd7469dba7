// tools: the subcommand table of the `dsv4` CLI. Each cmd_*.cc registers one command with
// DSV4_COMMAND(name, summary); main() dispatches on argv[1].
#pragma once

#include <functional>
#include <map>
#include <string>

namespace dsv4::cli {

using CommandFn = int (*)(int argc, char** argv);  // argv[0] is the subcommand name

struct Command {
  std::string summary;
  CommandFn fn;
};

std::map<std::string, Command>& command_table();

struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* summary, CommandFn fn) { command_table()[name] = {summary, fn}; }
};

}  // namespace dsv4::cli

#define DSV4_COMMAND(name, summary, fn) \
  static ::dsv4::cli::CommandRegistrar dsv4_command_registrar_##fn(name, summary, fn)
