//! `gpukit compare --junit FILE`: the run as a JUnit XML report (Ant's and Jenkins' format,
//! the one GitLab, Jenkins and GitHub test reporters read): one test suite, one test case per
//! compared file, missing file and extra file; a mismatch is a `failure` with its counts and
//! the diff image's path, a file that could not be read an `error`.

use xml::writer::{EmitterConfig, XmlEvent};

use super::verdict::{summary_line, verdict_word, PairDoc, Verdict};

/// A file only one folder has, as the JUnit report lists it.
pub struct Unpaired<'a> {
    pub name: &'a str,
    /// "missing" (only under EXPECTED) or "extra" (only under ACTUAL).
    pub kind: &'static str,
    /// The folder that lacks the file.
    pub from: &'a str,
    /// Allowed by --allow-missing or --allow-extra (then skipped, not failed), or added to
    /// EXPECTED by --update.
    pub allowed: bool,
    pub updated: bool,
}

/// What one test case says.
enum Outcome {
    Pass,
    Skipped(String),
    Failure { kind: String, message: String },
    Error(String),
}

/// The JUnit XML document for `files` (each named by its `name`) and `unpaired`, in one
/// suite named `suite`, which took `seconds`.
pub fn junit(suite: &str, files: &[PairDoc], unpaired: &[Unpaired], seconds: f64) -> String {
    let mut cases: Vec<(&str, Outcome, String)> = Vec::new();
    for doc in files {
        let mut out = summary_line(doc);
        if let Some(d) = &doc.diff {
            out += &format!("diff image: {d}\n");
        }
        if doc.updated {
            out += &format!("updated: {} now holds the actual image\n", doc.expected);
        }
        let outcome = match doc.status {
            Verdict::Match => Outcome::Pass,
            _ if doc.updated => Outcome::Pass,
            Verdict::Error => Outcome::Error(doc.reason.clone().unwrap_or_default()),
            v => Outcome::Failure {
                kind: serde_json::to_value(v)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                message: failure_message(doc),
            },
        };
        cases.push((&doc.name, outcome, out));
    }
    for u in unpaired {
        let what = match u.kind {
            "missing" => format!("{}: missing from {}", u.name, u.from),
            _ => format!("{}: extra, not in {}", u.name, u.from),
        };
        let outcome = if u.updated {
            Outcome::Pass
        } else if u.allowed {
            Outcome::Skipped(format!("{what} (allowed)"))
        } else {
            Outcome::Failure {
                kind: u.kind.to_string(),
                message: what.clone(),
            }
        };
        let out = if u.updated {
            format!("{what}; added to the expected images by --update\n")
        } else {
            format!("{what}\n")
        };
        cases.push((u.name, outcome, out));
    }
    let count = |f: fn(&Outcome) -> bool| cases.iter().filter(|c| f(&c.1)).count().to_string();
    let failures = count(|o| matches!(o, Outcome::Failure { .. }));
    let errors = count(|o| matches!(o, Outcome::Error(_)));
    let skipped = count(|o| matches!(o, Outcome::Skipped(_)));
    let tests = cases.len().to_string();
    let time = format!("{seconds:.3}");

    let mut buf = Vec::new();
    let mut w = EmitterConfig::new()
        .perform_indent(true)
        .create_writer(&mut buf);
    let suite = xml_text(suite);
    let events = (|| -> xml::writer::Result<()> {
        w.write(
            XmlEvent::start_element("testsuites")
                .attr("name", "gpukit compare")
                .attr("tests", &tests)
                .attr("failures", &failures)
                .attr("errors", &errors)
                .attr("time", &time),
        )?;
        w.write(
            XmlEvent::start_element("testsuite")
                .attr("name", &suite)
                .attr("tests", &tests)
                .attr("failures", &failures)
                .attr("errors", &errors)
                .attr("skipped", &skipped)
                .attr("time", &time),
        )?;
        for (name, outcome, out) in &cases {
            let name = xml_text(name);
            w.write(
                XmlEvent::start_element("testcase")
                    .attr("name", &name)
                    .attr("classname", "gpukit.compare"),
            )?;
            match outcome {
                Outcome::Pass => {}
                Outcome::Skipped(m) => {
                    w.write(XmlEvent::start_element("skipped").attr("message", &xml_text(m)))?;
                    w.write(XmlEvent::end_element())?;
                }
                Outcome::Failure { kind, message } => {
                    w.write(
                        XmlEvent::start_element("failure")
                            .attr("type", kind)
                            .attr("message", &xml_text(message)),
                    )?;
                    w.write(XmlEvent::characters(&xml_text(out)))?;
                    w.write(XmlEvent::end_element())?;
                }
                Outcome::Error(m) => {
                    w.write(
                        XmlEvent::start_element("error")
                            .attr("type", "error")
                            .attr("message", &xml_text(m)),
                    )?;
                    w.write(XmlEvent::end_element())?;
                }
            }
            w.write(XmlEvent::start_element("system-out"))?;
            w.write(XmlEvent::characters(&xml_text(out)))?;
            w.write(XmlEvent::end_element())?;
            w.write(XmlEvent::end_element())?;
        }
        w.write(XmlEvent::end_element())?;
        w.write(XmlEvent::end_element())
    })();
    events.expect("writing XML to memory does not fail");
    let mut text = String::from_utf8(buf).expect("the writer writes UTF-8");
    text.push('\n');
    text
}

/// The failure's one-line message: the verdict, the counts, the failed limits and the diff.
fn failure_message(doc: &PairDoc) -> String {
    let mut m = verdict_word(doc.status).to_string();
    match &doc.metrics {
        Some(k) => {
            m += &format!(
                ": {} of {} pixels differ, max diff {}",
                k.differing, k.compared, k.max_abs_diff
            );
            if !doc.failed.is_empty() {
                let names: Vec<String> = doc
                    .failed
                    .iter()
                    .filter_map(|f| serde_json::to_value(f).ok()?.as_str().map(str::to_string))
                    .collect();
                m += &format!(" (failed: {})", names.join(", "));
            }
        }
        None => {
            if let Some(r) = &doc.reason {
                m += &format!(": {r}");
            }
        }
    }
    if let Some(d) = &doc.diff {
        m += &format!("; diff image {d}");
    }
    m
}

/// `s` with the characters XML 1.0 cannot hold (control characters but tab, newline and
/// carriage return, which a file name may contain) replaced by U+FFFD.
fn xml_text(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => '\u{fffd}',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_replaces_what_xml_cannot_hold() {
        assert_eq!(xml_text("a\u{1}b\tc"), "a\u{fffd}b\tc");
    }
}
