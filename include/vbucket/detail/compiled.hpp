#pragma once
/// Header-only or compiled. By default every function of vbucket is compiled in each
/// translation unit that uses it. A target that links `vbucket::compiled` gets
/// `VBUCKET_COMPILED` defined: the common instantiations (the plans with the default cost, the
/// built-in rules over the built-in sources on a `meta_table`, configs of the built-in tables,
/// the JSON adapter's loading) are then declared `extern template` or declared only, and come
/// from the library instead of being compiled again. vbucket's own src/*.cpp define
/// `VBUCKET_COMPILED_SOURCE` to compile them.

/// 1 when the common instantiations come from the compiled library (extern), else 0.
#if defined(VBUCKET_COMPILED) && !defined(VBUCKET_COMPILED_SOURCE)
#define VBUCKET_EXTERN_TEMPLATES 1
#else
#define VBUCKET_EXTERN_TEMPLATES 0
#endif
