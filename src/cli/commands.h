// cli/commands.h — the kvq subcommands; each returns the process exit code.
#pragma once

namespace kvq::cli {

int run_demo(int argc, char** argv);

}  // namespace kvq::cli
