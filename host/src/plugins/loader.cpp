#include "plugins/loader.hpp"

#include <cstring>
#include <set>

#include <boost/dll/shared_library.hpp>

#include "util/abi_names.hpp"
#include "util/error.hpp"

namespace altgrad::host {

altgrad_version host_abi_version() { return ALTGRAD_ABI_VERSION_INIT; }

std::optional<std::string> abi_incompatibility(const altgrad_version& plugin) {
    const altgrad_version host = host_abi_version();
    const std::string both =
        "ABI " + version_string(plugin, false) + ", this host implements ABI " + version_string(host, false);
    if (plugin.major != host.major) return "built for " + both + " (major versions differ)";
    if (plugin.minor > host.minor) return "built for " + both + " (the plugin needs a newer host)";
    return std::nullopt;
}

namespace {

bool has_bytes(size_t struct_size, size_t needed) { return struct_size >= needed; }

struct checker {
    const manifest& m;
    [[noreturn]] void fail(const std::string& check, const std::string& what) const {
        throw error("plugin '" + m.name + "' (" + m.library.string() + "): " + check + ": " + what);
    }
};

void check_descriptor(const checker& c, const altgrad_descriptor* d) {
    if (d == nullptr) c.fail("descriptor", "entry has no descriptor");
    if (!has_bytes(d->struct_size, offsetof(altgrad_descriptor, param_count) + sizeof(size_t)))
        c.fail("descriptor", "struct_size " + std::to_string(d->struct_size) + " is smaller than ABI 1.0's");
    if (d->name == nullptr || d->description == nullptr) c.fail("descriptor", "name or description is NULL");
    const std::optional<altgrad_plugin_kind> kind = plugin_enum(d->kind, plugin_kind_names());
    if (!kind) c.fail("descriptor", plugin_enum_error("kind", d->kind, plugin_kind_names()));
    if (*kind != c.m.kind)
        c.fail("descriptor", std::string("library says kind '") + kind_name(*kind) + "', manifest says '" +
                                 kind_name(c.m.kind) + "'");
    if (c.m.name != d->name)
        c.fail("descriptor",
               std::string("library says name '") + d->name + "', manifest says '" + c.m.name + "'");
    if (std::memcmp(&d->version, &c.m.version, sizeof d->version) != 0)
        c.fail("descriptor", "library says version " + version_string(d->version) + ", manifest says " +
                                 version_string(c.m.version));
    if (d->param_count > 0 && d->params == nullptr)
        c.fail("descriptor", "param_count > 0 but params is NULL");
    std::set<std::string> declared;
    for (size_t i = 0; i < d->param_count; ++i) {
        const altgrad_param_spec& s = d->params[i];
        if (s.key == nullptr) c.fail("descriptor", "parameter " + std::to_string(i) + " has no key");
        declared.insert(s.key);
        const param_decl* decl = nullptr;
        for (const param_decl& p : c.m.params)
            if (p.key == s.key) decl = &p;
        if (decl == nullptr)
            c.fail("descriptor",
                   std::string("library declares parameter '") + s.key + "', the manifest does not");
        const std::optional<altgrad_param_type> type = plugin_enum(s.type, param_type_names());
        if (!type)
            c.fail("descriptor", std::string("parameter '") + s.key +
                                     "': " + plugin_enum_error("type", s.type, param_type_names()));
        if (decl->type != *type)
            c.fail("descriptor", std::string("parameter '") + s.key + "' is " + param_type_name(*type) +
                                     " in the library, " + param_type_name(decl->type) + " in the manifest");
    }
    for (const param_decl& p : c.m.params)
        if (declared.count(p.key) == 0)
            c.fail("descriptor", "manifest declares parameter '" + p.key + "', the library does not");
}

// Whether the entry holds a table appended in ABI 1.`minor`, ending `end`
// bytes into the struct: built for that minor or newer, and struct_size
// covers the field (an older entry ends before it).
bool has_later_table(const altgrad_entry* e, uint32_t minor, size_t end) {
    return (e->abi_version.major > 1 || e->abi_version.minor >= minor) && has_bytes(e->struct_size, end);
}
bool has_transform_field(const altgrad_entry* e) {
    return has_later_table(e, 4, offsetof(altgrad_entry, transform) + sizeof e->transform);
}
bool has_accumulator_field(const altgrad_entry* e) {
    return has_later_table(e, 5, offsetof(altgrad_entry, accumulator) + sizeof e->accumulator);
}

// The table of a kind that came in a later minor (transform 1.4, accumulator
// 1.5): the entry holds the field; the table is set, no smaller than that
// minor's (`needed` bytes) and has every function.
template <class Vtable, class Functions>
void check_later_table(const checker& c, const altgrad_entry* e, bool has_field, const Vtable* const* field,
                       const char* kind, const char* minor, size_t needed, Functions all_set) {
    const std::string article = kind[0] == 'a' ? "an " : "a ";
    if (!has_field)
        c.fail("entry", article + kind + " plugin needs ABI " + minor + " or newer (the entry reports ABI " +
                            version_string(e->abi_version, false) + " and struct_size " +
                            std::to_string(e->struct_size) + ", without the " + kind + " table)");
    const Vtable* v = *field;
    if (v == nullptr) c.fail("entry", article + kind + " plugin must set the " + kind + " table");
    if (!has_bytes(v->struct_size, needed))
        c.fail(std::string(kind) + " table", std::string("struct_size is smaller than ABI ") + minor + "'s");
    if (!all_set(*v)) c.fail(std::string(kind) + " table", "a function pointer is NULL");
}

void check_transform_table(const checker& c, const altgrad_entry* e) {
    check_later_table(
        c, e, has_transform_field(e), &e->transform, "transform", "1.4",
        offsetof(altgrad_transform_vtable, apply) + sizeof(e->transform->apply),
        [](const altgrad_transform_vtable& v) { return v.create && v.destroy && v.get_info && v.apply; });
}

void check_accumulator_table(const checker& c, const altgrad_entry* e) {
    check_later_table(
        c, e, has_accumulator_field(e), &e->accumulator, "accumulator", "1.5",
        offsetof(altgrad_accumulator_vtable, dot_add) + sizeof(e->accumulator->dot_add),
        [](const altgrad_accumulator_vtable& v) { return v.create && v.destroy && v.get_info && v.dot_add; });
}

void check_tables(const checker& c, const altgrad_entry* e) {
    const bool transform = has_transform_field(e) && e->transform != nullptr;
    const bool accumulator = has_accumulator_field(e) && e->accumulator != nullptr;
    const int tables = (e->format != nullptr) + (e->intervention != nullptr) + (e->diagnostic != nullptr) +
                       transform + accumulator;
    // A kind of a later minor with no table: its own check says why.
    const bool later = c.m.kind == ALTGRAD_KIND_TRANSFORM || c.m.kind == ALTGRAD_KIND_ACCUMULATOR;
    if (tables != 1 && !(later && tables == 0))
        c.fail("entry",
               "exactly one of the format, intervention, diagnostic, transform and accumulator "
               "tables must be set");
    switch (c.m.kind) {
        case ALTGRAD_KIND_FORMAT: {
            const altgrad_format_vtable* v = e->format;
            if (v == nullptr) c.fail("entry", "a format plugin must set the format table");
            if (!has_bytes(v->struct_size, offsetof(altgrad_format_vtable, decode) + sizeof v->decode))
                c.fail("format table", "struct_size is smaller than ABI 1.0's");
            if (!v->create || !v->destroy || !v->get_info || !v->quantize || !v->encode || !v->decode)
                c.fail("format table", "a function pointer is NULL");
            break;
        }
        case ALTGRAD_KIND_INTERVENTION: {
            const altgrad_intervention_vtable* v = e->intervention;
            if (v == nullptr) c.fail("entry", "an intervention plugin must set the intervention table");
            if (!has_bytes(v->struct_size,
                           offsetof(altgrad_intervention_vtable, observe) + sizeof v->observe))
                c.fail("intervention table", "struct_size is smaller than ABI 1.0's");
            if (!v->create || !v->destroy || !v->observe)
                c.fail("intervention table", "a function pointer is NULL");
            if (ALTGRAD_STRUCT_HAS(v, altgrad_intervention_vtable, load_state) &&
                !v->save_state != !v->load_state)
                c.fail("intervention table", "save_state and load_state must be set together (or both NULL)");
            break;
        }
        case ALTGRAD_KIND_DIAGNOSTIC: {
            const altgrad_diagnostic_vtable* v = e->diagnostic;
            if (v == nullptr) c.fail("entry", "a diagnostic plugin must set the diagnostic table");
            if (!has_bytes(v->struct_size, offsetof(altgrad_diagnostic_vtable, measure) + sizeof v->measure))
                c.fail("diagnostic table", "struct_size is smaller than ABI 1.0's");
            if (!v->create || !v->destroy || !v->interests || !v->max_values_per_tensor || !v->measure)
                c.fail("diagnostic table", "a function pointer is NULL");
            break;
        }
        case ALTGRAD_KIND_TRANSFORM: check_transform_table(c, e); break;
        case ALTGRAD_KIND_ACCUMULATOR: check_accumulator_table(c, e); break;
    }
}

}  // namespace

std::shared_ptr<const loaded_plugin> load_plugin(const manifest& m) {
    const checker c{m};
    if (auto why = abi_incompatibility(m.abi_version)) c.fail("abi_version in manifest", *why);

    auto lib = std::make_shared<boost::dll::shared_library>();
    try {
        lib->load(m.library.string(), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
        c.fail("load", e.what());
    }
    if (!lib->has(ALTGRAD_ENTRY_SYMBOL)) c.fail("entry", "the library does not export " ALTGRAD_ENTRY_SYMBOL);
    const auto entry_fn = lib->get<const altgrad_entry*()>(ALTGRAD_ENTRY_SYMBOL);
    const altgrad_entry* e = entry_fn();
    if (e == nullptr) c.fail("entry", ALTGRAD_ENTRY_SYMBOL "() returned NULL");
    if (!has_bytes(e->struct_size, offsetof(altgrad_entry, abi_version) + sizeof(altgrad_version)))
        c.fail("entry", "struct_size " + std::to_string(e->struct_size) + " is too small to hold a version");
    if (auto why = abi_incompatibility(e->abi_version)) c.fail("abi version", *why);
    // Both must be acceptable; within a major the manifest may name an older
    // minor than the library was rebuilt with.
    if (e->abi_version.major != m.abi_version.major)
        c.fail("abi version", "library reports ABI " + version_string(e->abi_version, false) +
                                  ", manifest says " + version_string(m.abi_version, false));
    if (!has_bytes(e->struct_size, offsetof(altgrad_entry, diagnostic) + sizeof e->diagnostic))
        c.fail("entry", "struct_size " + std::to_string(e->struct_size) + " is smaller than ABI 1.0's");
    check_descriptor(c, e->descriptor);
    check_tables(c, e);

    auto p = std::make_shared<loaded_plugin>();
    if (m.kind == ALTGRAD_KIND_DIAGNOSTIC) {
        try {
            p->headlines = read_headlines(*e);
        } catch (const std::exception& x) {
            c.fail("headlines", x.what());
        }
    }
    p->info = m;
    p->library = std::move(lib);
    p->entry = e;
    return p;
}

}  // namespace altgrad::host
