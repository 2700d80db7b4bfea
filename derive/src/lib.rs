//! `#[derive(Pod)]` for onesided: element types that may be moved as bytes by put and get.
//!
//! Re-exported as `onesided::Pod`, so a program needs no other dependency. The derive accepts a
//! struct with `#[repr(C)]` or `#[repr(transparent)]`, no generic parameters, every field itself
//! `Pod`, and no padding (checked at compile time: the size of the struct must equal the sum of
//! its fields'). It then implements `onesided::Zeroable` and `onesided::Pod` for it.

use proc_macro::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Error, Fields, parse_macro_input};

/// Implement `onesided::Pod` (and `onesided::Zeroable`) for a `#[repr(C)]` struct of `Pod`
/// fields without padding.
#[proc_macro_derive(Pod)]
pub fn derive_pod(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match pod(&input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn pod(input: &DeriveInput) -> Result<proc_macro2::TokenStream, Error> {
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(Error::new_spanned(
            &input.generics,
            "#[derive(Pod)] does not take generic parameters",
        ));
    }
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(f) => f.named.iter().collect::<Vec<_>>(),
            Fields::Unnamed(f) => f.unnamed.iter().collect(),
            Fields::Unit => Vec::new(),
        },
        _ => {
            return Err(Error::new_spanned(
                name,
                "#[derive(Pod)] is for structs (an enum or union may hold invalid bit patterns)",
            ));
        }
    };
    if !has_layout_repr(input)? {
        return Err(Error::new_spanned(
            name,
            "#[derive(Pod)] needs #[repr(C)] or #[repr(transparent)]: the layout must be fixed",
        ));
    }
    let types: Vec<_> = fields.iter().map(|f| &f.ty).collect();
    Ok(quote! {
        const _: () = {
            #[allow(dead_code)]
            fn fields_are_pod() {
                fn pod<T: ::onesided::Pod>() {}
                #( pod::<#types>(); )*
            }
            assert!(
                ::core::mem::size_of::<#name>() == 0 #( + ::core::mem::size_of::<#types>() )*,
                concat!("#[derive(Pod)]: ", stringify!(#name), " has padding bytes"),
            );
        };
        // SAFETY: the struct has a fixed layout (repr C or transparent), no padding (checked
        // above at compile time) and only Pod fields (checked above), so every bit pattern is
        // valid and all-zero is a valid value.
        unsafe impl ::onesided::Zeroable for #name {}
        // SAFETY: as above; `Pod` also needs `Copy` and `'static`, which the compiler checks.
        unsafe impl ::onesided::Pod for #name {}
    })
}

/// Whether `input` carries `#[repr(C)]` or `#[repr(transparent)]` (possibly with `align`).
fn has_layout_repr(input: &DeriveInput) -> Result<bool, Error> {
    let mut fixed = false;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("C") || meta.path.is_ident("transparent") {
                fixed = true;
            } else if meta.path.is_ident("align") {
                let _ = meta.input.parse::<proc_macro2::TokenStream>();
            } else if meta.path.is_ident("packed") {
                return Err(meta.error("#[derive(Pod)] does not take repr(packed)"));
            }
            Ok(())
        })?;
    }
    Ok(fixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derived(src: &str) -> Result<String, String> {
        let input: DeriveInput = syn::parse_str(src).expect("a struct");
        pod(&input)
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_repr_c_struct_gets_both_impls_and_the_checks() {
        let out = derived("#[repr(C)] struct P { a: f64, b: [u32; 2] }").unwrap();
        assert!(
            out.contains("unsafe impl :: onesided :: Pod for P"),
            "{out}"
        );
        assert!(
            out.contains("unsafe impl :: onesided :: Zeroable for P"),
            "{out}"
        );
        assert!(out.contains("size_of :: < [u32 ; 2] >"), "{out}");
        assert!(derived("#[repr(transparent)] struct T(u64);").is_ok());
        assert!(derived("#[repr(C, align(16))] struct A { x: [u64; 2] }").is_ok());
    }

    #[test]
    fn what_cannot_be_pod_is_refused_with_a_reason() {
        let refused = [
            ("struct R { a: u64 }", "repr(C)"),
            ("#[repr(C)] enum E { A, B }", "for structs"),
            ("#[repr(C)] struct G<T> { t: T }", "generic"),
            ("#[repr(C, packed)] struct K { a: u8, b: u64 }", "packed"),
        ];
        for (src, why) in refused {
            let e = derived(src).unwrap_err();
            assert!(e.contains(why), "{src}: {e}");
        }
    }
}
