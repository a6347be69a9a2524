// Test plugin: exports altgrad_plugin_entry as read-only data instead of a
// function. Calling it jumps into a non-executable page (SIGSEGV); discovery
// must list it as broken. altgrad.h is not included: it declares the entry as
// a function.
#define ENTRY_EXPORT __attribute__((visibility("default")))

extern "C" ENTRY_EXPORT const unsigned char altgrad_plugin_entry[64] = {0};
