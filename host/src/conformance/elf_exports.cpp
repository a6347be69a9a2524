#include "conformance/elf_exports.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "util/error.hpp"

namespace altgrad::host::conformance {

std::vector<std::string> exported_symbols(const std::filesystem::path& library) {
    std::ifstream in(library, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto bad = [&](const char* what) { return error(library.string() + ": " + what); };
    if (bytes.size() < sizeof(Elf64_Ehdr) || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0)
        throw bad("not an ELF file");
    Elf64_Ehdr eh;
    std::memcpy(&eh, bytes.data(), sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) throw bad("not a 64-bit ELF file");
    auto section = [&](size_t i) {
        Elf64_Shdr sh;
        const size_t at = eh.e_shoff + i * eh.e_shentsize;
        if (at + sizeof sh > bytes.size()) throw bad("truncated section table");
        std::memcpy(&sh, bytes.data() + at, sizeof sh);
        return sh;
    };
    std::vector<std::string> names;
    for (size_t i = 0; i < eh.e_shnum; ++i) {
        const Elf64_Shdr sym = section(i);
        if (sym.sh_type != SHT_DYNSYM) continue;
        const Elf64_Shdr str = section(sym.sh_link);
        if (sym.sh_offset + sym.sh_size > bytes.size() || str.sh_offset + str.sh_size > bytes.size())
            throw bad("truncated symbol table");
        for (size_t k = 0; k + sizeof(Elf64_Sym) <= sym.sh_size; k += sizeof(Elf64_Sym)) {
            Elf64_Sym s;
            std::memcpy(&s, bytes.data() + sym.sh_offset + k, sizeof s);
            const unsigned bind = ELF64_ST_BIND(s.st_info);
            const unsigned vis = ELF64_ST_VISIBILITY(s.st_other);
            if (s.st_shndx == SHN_UNDEF || s.st_name == 0 || s.st_name >= str.sh_size) continue;
            if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
            if (vis != STV_DEFAULT && vis != STV_PROTECTED) continue;
            names.emplace_back(bytes.c_str() + str.sh_offset + s.st_name);
        }
    }
    return names;
}

}  // namespace altgrad::host::conformance
