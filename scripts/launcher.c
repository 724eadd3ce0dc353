/*
 * /usr/local/bin/kube-nft-proxy where the compiled binary cannot be built (no denort to
 * download): replaces itself (execv, no wrapper process left) with
 *
 *   KNP_DENO run <the start:bundle task's flags> KNP_BUNDLE "$@"
 *
 * so signals, the exit status and the pid are the agent's own. scripts/stage-binary.sh
 * generates launcher_flags.h from deno.json at build time (KNP_DENO, KNP_BUNDLE and
 * KNP_RUN_ARGS, the words between "deno" and the bundle), so the flags cannot drift from the
 * task the real-kernel suite runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher_flags.h"

static const char *const run_args[] = {KNP_RUN_ARGS};

int main(int argc, char **argv) {
  const size_t n_run = sizeof(run_args) / sizeof(run_args[0]);
  /* deno, the run arguments, the bundle, the caller's arguments, NULL. */
  char **args = calloc(1 + n_run + 1 + (size_t)argc, sizeof(char *));
  if (args == NULL) {
    perror("kube-nft-proxy: calloc");
    return 127;
  }
  size_t i = 0;
  args[i++] = (char *)KNP_DENO;
  for (size_t k = 0; k < n_run; k++) args[i++] = (char *)run_args[k];
  args[i++] = (char *)KNP_BUNDLE;
  for (int k = 1; k < argc; k++) args[i++] = argv[k];
  args[i] = NULL;
  /* What the compiled binary never does: check for Deno updates (a request to Deno's release
   * host from every start) or prompt for a permission on a terminal. An explicit setting wins. */
  setenv("DENO_NO_UPDATE_CHECK", "1", 0);
  setenv("DENO_NO_PROMPT", "1", 0);
  execv(KNP_DENO, args);
  fprintf(stderr, "kube-nft-proxy: cannot exec %s: %s\n", KNP_DENO, strerror(errno));
  return 127;
}
