#pragma once
/// Header-only or compiled. By default every function of vbucket is compiled in each
/// translation unit that uses it. A target that links `vbucket::compiled` gets
/// `VBUCKET_COMPILED` defined: the common instantiations (the plans with the default cost, the
/// built-in rules over the built-in sources on a `meta_table` and on the blocks of a user's
/// records that `assign_range` converts, configs of the built-in tables, the JSON adapter's
/// loading) are then declared `extern template` or declared only, and come from the library
/// instead of being compiled again. So do the task pool (`detail::run_tasks`, which takes its
/// task type-erased: no translation unit compiles thread code) and the building of
/// `compiled_v2_rule`. vbucket's own src/*.cpp define
/// `VBUCKET_COMPILED_SOURCE` to compile them.

/// 1 when the common instantiations come from the compiled library (extern), else 0.
#if defined(VBUCKET_COMPILED) && !defined(VBUCKET_COMPILED_SOURCE)
#define VBUCKET_EXTERN_TEMPLATES 1
#else
#define VBUCKET_EXTERN_TEMPLATES 0
#endif

/// Cold non-template functions (error messages, resume-state text, statistics, dealing) are
/// declared in the class or namespace and defined after it, as
///   VBUCKET_COMPILED_INLINE std::string f(...);             // declaration
///   #if VBUCKET_HEADER_DEFINITIONS
///   VBUCKET_COMPILED_INLINE std::string f(...) { ... }      // definition
///   #endif
/// Header-only: `inline`, defined in every translation unit. With vbucket::compiled: declared
/// only, defined once in the library (whose sources see the definitions without `inline`).
/// The library defines them in one source file (src/vbucket.cpp, which also defines
/// `VBUCKET_COMPILED_CORE_SOURCE`); its other sources only declare them.
#if defined(VBUCKET_COMPILED_CORE_SOURCE) || \
    (!defined(VBUCKET_COMPILED) && !defined(VBUCKET_COMPILED_SOURCE))
#define VBUCKET_HEADER_DEFINITIONS 1
#else
#define VBUCKET_HEADER_DEFINITIONS 0
#endif
#if defined(VBUCKET_COMPILED) || defined(VBUCKET_COMPILED_SOURCE)
#define VBUCKET_COMPILED_INLINE
#else
#define VBUCKET_COMPILED_INLINE inline
#endif
