/*
 * src/os_win32_symbols.c - symbolization on Windows (hk_os_symbolize in
 * src/os.h): the module holding each address (GetModuleHandleEx), its
 * nearest exported symbol (the module's PE export directory), and with
 * HK_OS_SYMBOLIZE_LINES function names and file:line from DbgHelp when
 * dbghelp.dll can be loaded (PDB for MSVC builds; Wine's DbgHelp also
 * reads the DWARF of MinGW builds). Without it a frame still has its
 * module and offset.
 *
 * Invariants: module paths are kept in a static table (one entry per
 * module base, forward slashes, so callers can cut the directory at the
 * last '/'), never freed: the strings stay valid for the process's life.
 * dbghelp.dll is loaded and initialized at the first symbolization with
 * lines (a run without a report loads no extra module), unless
 * HEAPKIT_NO_DBGHELP was set when hk_os_symbolize_init read it;
 * DbgHelp is single-threaded, and so are the callers (os.h: callers
 * serialize). Nothing here calls malloc (DbgHelp itself allocates from its
 * own heap).
 */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1
#endif
#include "internal.h"

#include <windows.h>

#include <dbghelp.h>

/* ---- modules --------------------------------------------------------------------- */

#define SYM_MODULES 64
static struct {
    uintptr_t base;
    char path[MAX_PATH];
} sym_modules[SYM_MODULES];
static int sym_nmodules;

uintptr_t hk_os_module_base(const void *addr) {
    HMODULE m = NULL;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCWSTR)addr, &m))
        return 0;
    return (uintptr_t)m;
}

uintptr_t hk_os_main_base(void) { return (uintptr_t)GetModuleHandleW(NULL); }

/* The path of the module at base, from the table (added on first sight). */
static const char *sym_module_path(uintptr_t base) {
    for (int i = 0; i < sym_nmodules; i++)
        if (sym_modules[i].base == base) return sym_modules[i].path;
    if (sym_nmodules == SYM_MODULES) return NULL;
    char *p = sym_modules[sym_nmodules].path;
    DWORD n = GetModuleFileNameA((HMODULE)base, p, MAX_PATH);
    if (n == 0 || n >= MAX_PATH) return NULL;
    for (DWORD i = 0; i < n; i++)
        if (p[i] == '\\') p[i] = '/';
    sym_modules[sym_nmodules++].base = base;
    return p;
}

/* The nearest export of the module at base at or below pc (its name and
 * address), from the PE export directory. */
static void sym_nearest_export(uintptr_t base, uintptr_t pc, hk_os_symbol *s) {
    const IMAGE_DOS_HEADER *dos = (const IMAGE_DOS_HEADER *)base;
    if (dos->e_magic != IMAGE_DOS_SIGNATURE) return;
    const IMAGE_NT_HEADERS *nt = (const IMAGE_NT_HEADERS *)(base + (uintptr_t)dos->e_lfanew);
    if (nt->Signature != IMAGE_NT_SIGNATURE ||
        nt->OptionalHeader.NumberOfRvaAndSizes <= IMAGE_DIRECTORY_ENTRY_EXPORT)
        return;
    const IMAGE_DATA_DIRECTORY *dd = &nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_EXPORT];
    if (!dd->VirtualAddress || !dd->Size) return;
    const IMAGE_EXPORT_DIRECTORY *ed = (const IMAGE_EXPORT_DIRECTORY *)(base + dd->VirtualAddress);
    const DWORD *funcs = (const DWORD *)(base + ed->AddressOfFunctions);
    const DWORD *names = (const DWORD *)(base + ed->AddressOfNames);
    const WORD *ords = (const WORD *)(base + ed->AddressOfNameOrdinals);
    uintptr_t best = 0;
    const char *best_name = NULL;
    for (DWORD i = 0; i < ed->NumberOfNames; i++) {
        if (ords[i] >= ed->NumberOfFunctions) continue;
        DWORD rva = funcs[ords[i]];
        if (rva >= dd->VirtualAddress && rva < dd->VirtualAddress + dd->Size) continue; /* a forwarder */
        uintptr_t a = base + rva;
        if (a <= pc && a > best) {
            best = a;
            best_name = (const char *)(base + names[i]);
        }
    }
    if (best_name) {
        s->name = best_name;
        s->name_addr = best;
    }
}

/* ---- DbgHelp ------------------------------------------------------------------------ */

typedef DWORD(WINAPI *sym_set_options_fn)(DWORD);
typedef BOOL(WINAPI *sym_initialize_fn)(HANDLE, PCSTR, BOOL);
typedef BOOL(WINAPI *sym_from_addr_fn)(HANDLE, DWORD64, PDWORD64, PSYMBOL_INFO);
typedef BOOL(WINAPI *sym_line_fn)(HANDLE, DWORD64, PDWORD, PIMAGEHLP_LINE64);
typedef BOOL(WINAPI *sym_refresh_fn)(HANDLE);

static struct {
    sym_set_options_fn set_options;
    sym_initialize_fn initialize;
    sym_from_addr_fn from_addr;
    sym_line_fn line;
    sym_refresh_fn refresh;
} sym_dbg;
static int sym_dbg_wanted; /* HEAPKIT_NO_DBGHELP unset (read at init) */
static int sym_dbg_tried;
static int sym_dbg_loaded; /* every function was found */
static int sym_dbg_ready;  /* SymInitialize succeeded */
static int sym_looked;

static FARPROC sym_proc(HMODULE h, const char *name) { return GetProcAddress(h, name); }

void hk_os_symbolize_init(void) {
    if (__atomic_load_n(&sym_looked, __ATOMIC_ACQUIRE)) return;
    sym_dbg_wanted = GetEnvironmentVariableA("HEAPKIT_NO_DBGHELP", NULL, 0) == 0;
    __atomic_store_n(&sym_looked, 1, __ATOMIC_RELEASE);
}

static void sym_dbghelp_load(void) {
    if (sym_dbg_tried || !sym_dbg_wanted) return;
    sym_dbg_tried = 1;
    HMODULE h = LoadLibraryA("dbghelp.dll");
    if (h) {
        FARPROC f[5] = {sym_proc(h, "SymSetOptions"), sym_proc(h, "SymInitialize"), sym_proc(h, "SymFromAddr"),
                        sym_proc(h, "SymGetLineFromAddr64"), sym_proc(h, "SymRefreshModuleList")};
        if (f[0] && f[1] && f[2] && f[3]) {
            memcpy(&sym_dbg.set_options, &f[0], sizeof f[0]);
            memcpy(&sym_dbg.initialize, &f[1], sizeof f[1]);
            memcpy(&sym_dbg.from_addr, &f[2], sizeof f[2]);
            memcpy(&sym_dbg.line, &f[3], sizeof f[3]);
            if (f[4]) memcpy(&sym_dbg.refresh, &f[4], sizeof f[4]);
            sym_dbg_loaded = 1;
        }
    }
}

/* Fills func and loc of s from DbgHelp. */
static void sym_dbghelp_resolve(hk_os_symbol *s) {
    HANDLE proc = GetCurrentProcess();
    DWORD64 a = (DWORD64)(s->return_address ? s->pc - 1 : s->pc);
    union {
        SYMBOL_INFO info;
        char bytes[sizeof(SYMBOL_INFO) + 256];
    } u;
    memset(&u, 0, sizeof u.info);
    u.info.SizeOfStruct = sizeof u.info;
    u.info.MaxNameLen = 255;
    DWORD64 disp = 0;
    if (sym_dbg.from_addr(proc, a, &disp, &u.info) && u.info.NameLen > 0) {
        size_t m = u.info.NameLen < sizeof s->func ? u.info.NameLen : sizeof s->func - 1;
        memcpy(s->func, u.info.Name, m);
        s->func[m] = 0;
    }
    IMAGEHLP_LINE64 line;
    memset(&line, 0, sizeof line);
    line.SizeOfStruct = sizeof line;
    DWORD ldisp = 0;
    if (sym_dbg.line(proc, a, &ldisp, &line) && line.FileName && line.LineNumber > 0) {
        char num[16];
        int k = 0;
        unsigned v = (unsigned)line.LineNumber;
        do {
            num[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v && k < 15);
        const char *file = line.FileName;
        size_t fl = strlen(file), cap = sizeof s->loc;
        if (fl + 2 + (size_t)k > cap) { /* keep the end of a long path */
            file += fl + 2 + (size_t)k - cap;
            fl = strlen(file);
        }
        memcpy(s->loc, file, fl);
        for (size_t i = 0; i < fl; i++)
            if (s->loc[i] == '\\') s->loc[i] = '/';
        s->loc[fl] = ':';
        size_t o = fl + 1;
        while (k) s->loc[o++] = num[--k];
        s->loc[o] = 0;
    }
}

void hk_os_symbolize(hk_os_symbol *syms, int n, unsigned flags) {
    for (int i = 0; i < n; i++) {
        hk_os_symbol *s = &syms[i];
        s->module = NULL;
        s->base = 0;
        s->name = NULL;
        s->name_addr = 0;
        s->func[0] = 0;
        s->loc[0] = 0;
        uintptr_t base = hk_os_module_base((const void *)s->pc);
        if (!base) continue;
        s->base = base;
        s->module = sym_module_path(base);
        sym_nearest_export(base, s->return_address ? s->pc - 1 : s->pc, s);
    }
    if (!(flags & HK_OS_SYMBOLIZE_LINES) || !__atomic_load_n(&sym_looked, __ATOMIC_ACQUIRE)) return;
    sym_dbghelp_load();
    if (!sym_dbg_loaded) return;
    if (!sym_dbg_ready) {
        sym_dbg.set_options(SYMOPT_UNDNAME | SYMOPT_DEFERRED_LOADS | SYMOPT_LOAD_LINES | SYMOPT_FAIL_CRITICAL_ERRORS);
        sym_dbg_ready = sym_dbg.initialize(GetCurrentProcess(), NULL, TRUE) ? 1 : -1;
    } else if (sym_dbg_ready > 0 && sym_dbg.refresh) {
        (void)sym_dbg.refresh(GetCurrentProcess()); /* modules loaded since */
    }
    if (sym_dbg_ready < 0) return;
    for (int i = 0; i < n; i++)
        if (syms[i].module) sym_dbghelp_resolve(&syms[i]);
}
