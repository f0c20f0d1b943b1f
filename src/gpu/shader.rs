//! How WGSL is composed, the one way for every kernel: a file from wgsl/, whose
//! `// import: NAME` lines are replaced by the shared snippets of wgsl/shared/ (each once,
//! where it is first imported), and a named variant, which may set the file's `const` and
//! `alias` declarations (for sizes WGSL needs as constants, such as a function-scope array's
//! length, and element types), fill import slots (a snippet chosen per variant), and enable
//! extensions. Everything else a kernel's size depends on is a pipeline-overridable constant,
//! given when the pipeline is built.

use anyhow::{anyhow, bail, Result};

/// A WGSL file from wgsl/, compiled into the binary. Make one with [`shader!`](crate::shader).
#[derive(Clone, Copy, Debug)]
pub struct Shader {
    pub name: &'static str,
    pub source: &'static str,
}

/// `shader!("copy")` is wgsl/copy.wgsl; `shader!("shared/grid")` a snippet.
#[macro_export]
macro_rules! shader {
    ($name:literal) => {
        $crate::gpu::Shader {
            name: concat!($name, ".wgsl"),
            source: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/wgsl/",
                $name,
                ".wgsl"
            )),
        }
    };
}

/// The snippets `// import: NAME` lines may name, by file name without `.wgsl`: every file of
/// wgsl/shared/, listed by build.rs.
const SNIPPETS: &[(&str, Shader)] = include!(concat!(env!("OUT_DIR"), "/snippets.rs"));

/// A named variant of a shader: the file's defaults with a few declarations changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Variant {
    /// Its name, for labels and messages ("" for the file as it is).
    pub name: String,
    /// `enable` extensions put first (`f16`).
    pub enables: Vec<&'static str>,
    /// New right-hand sides of the file's `const NAME: T = ...;` or `alias NAME = ...;`
    /// declarations. A name the file does not declare so is an error.
    pub decls: Vec<(&'static str, String)>,
    /// Import slots: `// import: SLOT` takes this snippet instead.
    pub slots: Vec<(&'static str, &'static str)>,
}

impl Variant {
    /// A variant setting `const` u32 declarations.
    pub fn consts(name: impl Into<String>, consts: &[(&'static str, u32)]) -> Variant {
        Variant {
            name: name.into(),
            decls: consts.iter().map(|&(k, v)| (k, format!("{v}u"))).collect(),
            ..Variant::default()
        }
    }

    /// This variant with `slot` filled by `snippet`.
    pub fn slot(mut self, slot: &'static str, snippet: &'static str) -> Variant {
        self.slots.push((slot, snippet));
        self
    }
}

/// A shader as handed to the device (and to the shader tests): its label and full source.
#[derive(Clone, Debug)]
pub struct Composed {
    pub label: String,
    pub source: String,
    /// The snippets of wgsl/shared/ it imported, by name.
    pub snippets: Vec<String>,
}

/// `shader` as `variant` makes it: imports resolved, declarations set, extensions enabled.
pub fn compose(shader: &Shader, variant: &Variant) -> Result<Composed> {
    let mut done: Vec<&str> = Vec::new();
    let mut body = String::new();
    import(shader, variant, &mut done, &mut body)?;
    let mut source = String::new();
    for e in &variant.enables {
        source += &format!("enable {e};\n");
    }
    source += &set_decls(shader.name, &body, &variant.decls)?;
    let stem = shader.name.trim_end_matches(".wgsl");
    let label = if variant.name.is_empty() {
        stem.to_string()
    } else {
        format!("{stem}[{}]", variant.name)
    };
    let snippets = done.iter().map(|s| s.to_string()).collect();
    Ok(Composed {
        label,
        source,
        snippets,
    })
}

/// Appends `shader`'s lines to `out`, each `// import: NAME` line replaced by its snippet
/// (itself composed the same way) unless already imported.
fn import<'a>(
    shader: &Shader,
    variant: &'a Variant,
    done: &mut Vec<&'a str>,
    out: &mut String,
) -> Result<()> {
    for line in shader.source.lines() {
        let Some(name) = line.trim().strip_prefix("// import:").map(str::trim) else {
            *out += line;
            out.push('\n');
            continue;
        };
        let chosen = variant
            .slots
            .iter()
            .find(|(slot, _)| *slot == name)
            .map_or(name, |&(_, snippet)| snippet);
        let (key, snippet) = SNIPPETS
            .iter()
            .find(|(n, _)| *n == chosen)
            .ok_or_else(|| anyhow!("{}: no snippet or slot named {name:?}", shader.name))?;
        if !done.contains(key) {
            done.push(key);
            import(snippet, variant, done, out)?;
        }
    }
    Ok(())
}

/// `source` with each declaration of `decls` given its new right-hand side.
fn set_decls(name: &str, source: &str, decls: &[(&str, String)]) -> Result<String> {
    if decls.is_empty() {
        return Ok(source.to_string());
    }
    let mut lines: Vec<String> = source.lines().map(str::to_string).collect();
    for (decl, value) in decls {
        let (const_prefix, alias_prefix) = (format!("const {decl}:"), format!("alias {decl} ="));
        let line = lines
            .iter_mut()
            .find(|l| l.starts_with(&const_prefix) || l.starts_with(&alias_prefix))
            .ok_or_else(|| anyhow!("{name} declares no `const {decl}` or `alias {decl}`"))?;
        let eq = line.find('=').expect("both prefixes hold an =");
        let Some(end) = line[eq..].find(';') else {
            bail!("{name}: the declaration of {decl} has no `;`");
        };
        *line = format!("{} {value}{}", &line[..=eq], &line[eq + end..]);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_set_by_name_and_unknown_names_fail() {
        let shader = Shader {
            name: "t.wgsl",
            source:
                "const A: u32 = 4u; // four\nconst AB: u32 = 1u;\nalias E = vec4<f32>;\nfn f() {}",
        };
        let mut v = Variant::consts("x", &[("A", 8), ("AB", 2)]);
        v.decls.push(("E", "vec4<f16>".into()));
        v.enables.push("f16");
        let out = compose(&shader, &v).unwrap();
        assert_eq!(
            out.source,
            "enable f16;\nconst A: u32 = 8u; // four\nconst AB: u32 = 2u;\nalias E = vec4<f16>;\nfn f() {}\n"
        );
        assert_eq!(out.label, "t[x]");
        assert_eq!(
            compose(&shader, &Variant::default()).unwrap().source,
            format!("{}\n", shader.source)
        );
        assert!(compose(&shader, &Variant::consts("", &[("B", 1)])).is_err());
    }

    #[test]
    fn imports_are_resolved_once_and_slots_pick_the_snippet() {
        let shader = Shader {
            name: "t.wgsl",
            source: "fn f() {}\n// import: grid\n// import: grid\n// import: path",
        };
        let v = Variant::default().slot("path", "scan_op");
        let out = compose(&shader, &v).unwrap().source;
        assert_eq!(out.matches("fn workgroup_index").count(), 1);
        assert!(out.contains("fn combine"), "{out}");
        assert!(
            compose(&shader, &Variant::default()).is_err(),
            "unfilled slot"
        );
    }
}
