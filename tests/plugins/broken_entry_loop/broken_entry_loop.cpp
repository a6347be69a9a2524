// Test plugin: its entry function never returns. Discovery must give up on it
// after its time limit and list it as broken.
#include <unistd.h>

#include <altgrad/altgrad.h>

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    for (;;) ::pause();  // sleeps until a signal ends the process
}
