// The behaviour the three plugin handles share through plugin_instance:
// the kind check, parameters resolved before create, create's failures named
// with the plugin and its message, exactly one destroy, the library kept
// while an instance lives, and a failed call turned into a host::error.
//
// The plugin here is scripted in-process (its vtables are this file's
// functions, driven by `script`), so every path can be forced and counted;
// a loaded_plugin is what the loader would have produced, without a library.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <type_traits>

#include <altgrad/altgrad.h>

#include "plugins/diagnostic_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/intervention_handle.hpp"
#include "util/error.hpp"

// The plugin's own instance types (opaque to the host).
struct altgrad_format {
    int serial;
};
struct altgrad_diagnostic {
    int serial;
};
struct altgrad_intervention {
    int serial;
};

namespace altgrad::test {
namespace {

using host::diagnostic_handle;
using host::format_handle;
using host::intervention_handle;

// What the scripted plugin does next, and what it saw.
struct scripted_plugin {
    altgrad_status create_status = ALTGRAD_STATUS_OK;
    std::string create_message;                      // written on failure when not empty
    bool unterminated_message = false;               // fill the whole message, no NUL
    bool null_instance = false;                      // OK but *out left NULL
    altgrad_status call_status = ALTGRAD_STATUS_OK;  // quantize / measure / observe
    std::string call_message;
    altgrad_status get_info_status = ALTGRAD_STATUS_OK;
    uint32_t interests = 1u << ALTGRAD_TENSOR_WEIGHT;

    int creates = 0, destroys = 0;
    int last_created = 0, last_destroyed = 0;  // serials
    int64_t bits_seen = -1;                    // the "bits" parameter create received
};
scripted_plugin script;

void fill(altgrad_error* e, const std::string& message, bool unterminated) {
    if (unterminated) std::memset(e->message, 'x', sizeof e->message);
    else if (!message.empty()) std::snprintf(e->message, sizeof e->message, "%s", message.c_str());
}

template <class Instance>
altgrad_status scripted_create(const altgrad_param_list* params, Instance** out, altgrad_error* e) {
    ++script.creates;
    for (size_t i = 0; i < params->count; ++i)
        if (std::strcmp(params->items[i].key, "bits") == 0) script.bits_seen = params->items[i].int_value;
    if (script.create_status != ALTGRAD_STATUS_OK) {
        fill(e, script.create_message, script.unterminated_message);
        return script.create_status;
    }
    if (!script.null_instance) *out = new Instance{script.last_created = script.creates};
    return ALTGRAD_STATUS_OK;
}

template <class Instance>
void scripted_destroy(Instance* p) {
    ++script.destroys;
    script.last_destroyed = p->serial;
    delete p;
}

altgrad_status scripted_call(altgrad_error* e) {
    fill(e, script.call_message, false);
    return script.call_status;
}

// An E4M3-like info, valid by every check the format handle makes.
altgrad_status format_get_info(const altgrad_format*, altgrad_format_info* info, altgrad_error*) {
    if (script.get_info_status != ALTGRAD_STATUS_OK) return script.get_info_status;
    info->family = ALTGRAD_FAMILY_FLOAT;
    info->total_bits = 8;
    info->code_bytes = 1;
    info->zero = ALTGRAD_ZERO_SIGNED;
    info->max_finite = 448.0;
    info->lowest_finite = -448.0;
    info->min_normal = 0.015625;
    info->rounding_modes = 1u << ALTGRAD_ROUND_NEAREST_EVEN;
    info->memory_kinds = 1u << ALTGRAD_MEMORY_HOST;
    return ALTGRAD_STATUS_OK;
}
altgrad_status format_quantize(const altgrad_format*, altgrad_quantize_args*, altgrad_error* e) {
    return scripted_call(e);
}
altgrad_status format_encode(const altgrad_format*, altgrad_encode_args*, altgrad_error* e) {
    return scripted_call(e);
}
altgrad_status format_decode(const altgrad_format*, altgrad_decode_args*, altgrad_error* e) {
    return scripted_call(e);
}

uint32_t diagnostic_interests(const altgrad_diagnostic*) { return script.interests; }
size_t diagnostic_max_values(const altgrad_diagnostic*) { return 1; }
altgrad_status diagnostic_measure(altgrad_diagnostic*, uint64_t, const altgrad_tensor_view*, size_t,
                                  altgrad_value_buffer*, altgrad_error* e) {
    return scripted_call(e);
}

altgrad_status intervention_observe(altgrad_intervention*, const altgrad_observation*, altgrad_action_buffer*,
                                    altgrad_error* e) {
    return scripted_call(e);
}

const altgrad_format_vtable kFormatTable = {sizeof(altgrad_format_vtable),
                                            scripted_create<altgrad_format>,
                                            scripted_destroy<altgrad_format>,
                                            format_get_info,
                                            format_quantize,
                                            format_encode,
                                            format_decode};
const altgrad_diagnostic_vtable kDiagnosticTable = {sizeof(altgrad_diagnostic_vtable),
                                                    scripted_create<altgrad_diagnostic>,
                                                    scripted_destroy<altgrad_diagnostic>,
                                                    diagnostic_interests,
                                                    diagnostic_max_values,
                                                    diagnostic_measure};
altgrad_intervention_vtable intervention_table() {
    altgrad_intervention_vtable t{};
    t.struct_size = sizeof t;
    t.create = scripted_create<altgrad_intervention>;
    t.destroy = scripted_destroy<altgrad_intervention>;
    t.observe = intervention_observe;
    return t;
}
const altgrad_intervention_vtable kInterventionTable = intervention_table();

// Per handle: its kind, its table in an entry, and one call that goes
// through the plugin (named as the ABI names it).
altgrad_plugin_kind kind_of(const format_handle*) { return ALTGRAD_KIND_FORMAT; }
altgrad_plugin_kind kind_of(const diagnostic_handle*) { return ALTGRAD_KIND_DIAGNOSTIC; }
altgrad_plugin_kind kind_of(const intervention_handle*) { return ALTGRAD_KIND_INTERVENTION; }
void set_table(altgrad_entry& e, const format_handle*) { e.format = &kFormatTable; }
void set_table(altgrad_entry& e, const diagnostic_handle*) { e.diagnostic = &kDiagnosticTable; }
void set_table(altgrad_entry& e, const intervention_handle*) { e.intervention = &kInterventionTable; }
// Returns the call's name, as errors give it.
const char* call_once(format_handle& h) {
    float x = 1.0f;
    h.quantize(&x, &x, 1, {});  // may throw
    return "quantize";
}
const char* call_once(diagnostic_handle& h) {
    h.measure(0, nullptr, 0);
    return "measure";
}
const char* call_once(intervention_handle& h) {
    h.observe(host::observation{});
    return "observe";
}

// How a manifest spells each kind (manifest.hpp), with its article.
const char* spelled(altgrad_plugin_kind k) {
    return k == ALTGRAD_KIND_FORMAT       ? "a format"
           : k == ALTGRAD_KIND_DIAGNOSTIC ? "a diagnostic"
                                          : "an intervention";
}

// A loaded plugin named "scripted" of the Handle's kind (or of As's),
// declaring one parameter: bits, int, default 4, 1..8.
template <class Handle, class As = Handle>
std::shared_ptr<const host::loaded_plugin> scripted() {
    static altgrad_entry entry = [] {
        altgrad_entry e{};
        e.struct_size = sizeof e;
        e.abi_version = ALTGRAD_ABI_VERSION_INIT;
        set_table(e, static_cast<const As*>(nullptr));
        return e;
    }();
    auto p = std::make_shared<host::loaded_plugin>();
    p->info.kind = kind_of(static_cast<const As*>(nullptr));
    p->info.name = "scripted";
    host::param_decl bits;
    bits.key = "bits";
    bits.type = ALTGRAD_PARAM_INT;
    bits.default_int = 4;
    bits.min = 1;
    bits.max = 8;
    p->info.params.push_back(bits);
    p->entry = &entry;
    return p;
}

// The error create() throws, or "" when it does not.
template <class Handle>
std::string create_error(std::shared_ptr<const host::loaded_plugin> plugin,
                         const host::given_params& params = {}) {
    try {
        Handle::create(std::move(plugin), params, "test.toml: params");
    } catch (const host::error& e) {
        return e.what();
    }
    return "";
}

template <class Handle>
class PluginInstance : public ::testing::Test {
protected:
    void SetUp() override { script = scripted_plugin{}; }
};
using Handles = ::testing::Types<format_handle, diagnostic_handle, intervention_handle>;
TYPED_TEST_SUITE(PluginInstance, Handles);

TYPED_TEST(PluginInstance, DestroysItsInstanceExactlyOnce) {
    {
        std::shared_ptr<TypeParam> h = TypeParam::create(scripted<TypeParam>());
        const std::shared_ptr<TypeParam> copy = h;  // handles are shared, instances are not
        EXPECT_EQ(script.creates, 1);
        EXPECT_EQ(h->name(), "scripted");
        h.reset();
        EXPECT_EQ(script.destroys, 0);
    }
    EXPECT_EQ(script.destroys, 1);
    EXPECT_EQ(script.last_destroyed, script.last_created);
}

TYPED_TEST(PluginInstance, KeepsThePluginLoadedWhileItLives) {
    std::shared_ptr<const host::loaded_plugin> plugin = scripted<TypeParam>();
    const std::weak_ptr<const host::loaded_plugin> watch = plugin;
    std::shared_ptr<TypeParam> h = TypeParam::create(std::move(plugin));
    EXPECT_FALSE(watch.expired());
    EXPECT_EQ(&h->plugin(), watch.lock().get());
    h.reset();
    EXPECT_TRUE(watch.expired());
}

TYPED_TEST(PluginInstance, PassesResolvedParametersToCreate) {
    TypeParam::create(scripted<TypeParam>());
    EXPECT_EQ(script.bits_seen, 4);  // the manifest's default
    TypeParam::create(scripted<TypeParam>(), {{"bits", "7"}});
    EXPECT_EQ(script.bits_seen, 7);
    EXPECT_EQ(script.destroys, 2);
}

TYPED_TEST(PluginInstance, RefusedParametersNeverReachCreate) {
    const std::string e = create_error<TypeParam>(scripted<TypeParam>(), {{"bits", "9"}});
    EXPECT_EQ(e.rfind("test.toml: params: plugin 'scripted': parameter 'bits' = \"9\": out of range", 0), 0u)
        << e;
    EXPECT_EQ(create_error<TypeParam>(scripted<TypeParam>(), {{"bitz", "4"}}),
              "test.toml: params: plugin 'scripted': unknown parameter 'bitz' (declared: bits)");
    EXPECT_EQ(script.creates, 0);
}

TYPED_TEST(PluginInstance, ACreateFailureNamesThePluginAndItsMessage) {
    script.create_status = ALTGRAD_STATUS_INVALID_ARGUMENT;
    script.create_message = "bits must be even";
    EXPECT_EQ(create_error<TypeParam>(scripted<TypeParam>()),
              "plugin 'scripted': create failed (invalid argument): bits must be even");
    script.create_status = ALTGRAD_STATUS_OUT_OF_MEMORY;
    script.create_message.clear();
    EXPECT_EQ(create_error<TypeParam>(scripted<TypeParam>()),
              "plugin 'scripted': create failed (out of memory): no message");
    EXPECT_EQ(script.creates, 2);
    EXPECT_EQ(script.destroys, 0);  // a failed create leaves the host nothing to destroy
}

TYPED_TEST(PluginInstance, AnUnterminatedMessageIsNotRead) {
    script.create_status = ALTGRAD_STATUS_INTERNAL;
    script.unterminated_message = true;
    EXPECT_EQ(create_error<TypeParam>(scripted<TypeParam>()),
              "plugin 'scripted': create failed (internal error): no message");
}

TYPED_TEST(PluginInstance, CreateWithoutAnInstanceIsRefused) {
    script.null_instance = true;
    EXPECT_EQ(create_error<TypeParam>(scripted<TypeParam>()),
              "plugin 'scripted': create: returned OK but no instance");
    EXPECT_EQ(script.destroys, 0);
}

TYPED_TEST(PluginInstance, APluginOfAnotherKindIsRefusedBeforeCreate) {
    // Each handle given the next kind's plugin.
    using other = std::conditional_t<
        std::is_same_v<TypeParam, format_handle>, diagnostic_handle,
        std::conditional_t<std::is_same_v<TypeParam, diagnostic_handle>, intervention_handle, format_handle>>;
    const altgrad_plugin_kind mine = kind_of(static_cast<const TypeParam*>(nullptr));
    const altgrad_plugin_kind theirs = kind_of(static_cast<const other*>(nullptr));
    EXPECT_EQ(create_error<TypeParam>(scripted<TypeParam, other>()),
              std::string("plugin 'scripted' is ") + spelled(theirs) + " plugin, not " + spelled(mine));
    EXPECT_EQ(script.creates, 0);
}

TYPED_TEST(PluginInstance, AFailedCallNamesThePluginTheCallAndTheMessage) {
    const std::shared_ptr<TypeParam> h = TypeParam::create(scripted<TypeParam>());
    script.call_message = "not on Tuesdays";
    const std::string call = call_once(*h);  // its name, from a call that succeeds
    script.call_status = ALTGRAD_STATUS_UNSUPPORTED;
    try {
        call_once(*h);
        ADD_FAILURE() << "no error from " << call;
    } catch (const host::error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "plugin 'scripted': " + call + " failed (unsupported): not on Tuesdays");
    }
    EXPECT_EQ(script.destroys, 0);  // a failed call leaves the instance to its handle
}

// The kind's own checks after create: a failure there still destroys the
// instance once (the base is built, so its destructor runs).
TEST(PluginInstanceChecks, AFormatWhoseInfoFailsIsDestroyed) {
    script = scripted_plugin{};
    script.get_info_status = ALTGRAD_STATUS_INTERNAL;
    EXPECT_EQ(create_error<format_handle>(scripted<format_handle>()),
              "plugin 'scripted': get_info failed (internal error): no message");
    EXPECT_EQ(script.creates, 1);
    EXPECT_EQ(script.destroys, 1);
}

TEST(PluginInstanceChecks, ADiagnosticWithUnknownInterestsIsDestroyed) {
    script = scripted_plugin{};
    script.interests = 1u << 30;
    EXPECT_EQ(create_error<diagnostic_handle>(scripted<diagnostic_handle>()),
              "plugin 'scripted': interests: unknown tensor roles 1073741824");
    EXPECT_EQ(script.creates, 1);
    EXPECT_EQ(script.destroys, 1);
}

}  // namespace
}  // namespace altgrad::test
