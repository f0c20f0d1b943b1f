//! `gpukit compare --html DIR`: the run as one HTML page (DIR/index.html, its images in
//! DIR/images/) that works offline, with no script or style from elsewhere: a summary, then
//! each failing pair with its expected, actual and diff images side by side, a slider and a
//! toggle between expected and actual, and its metrics.

use std::fmt::Write;

use super::verdict::{verdict_word, PairDoc, Verdict};

/// The page's images of one failing pair, relative to the page.
#[derive(Clone, Debug)]
pub struct PairImages {
    pub expected: String,
    pub actual: String,
    /// None when no diff image was drawn (not compared).
    pub diff: Option<String>,
}

/// What the page lists besides the pairs.
pub struct Listing<'a> {
    pub title: &'a str,
    pub missing: &'a [String],
    pub extra: &'a [String],
    pub updated: &'a [String],
    /// Whether missing and extra files fail the run (not allowed).
    pub missing_fails: bool,
    pub extra_fails: bool,
}

/// `s` with HTML's special characters escaped (for text and attribute values).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A path relative to the page as a URL: each byte outside a safe set percent-encoded.
fn href(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-_./~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

const STYLE: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; word-break: break-all; }
.summary td, .metrics td, .metrics th { padding: 0.1em 0.8em 0.1em 0; text-align: left; }
.fail { color: #b00; } .pass { color: #080; }
.images { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
figure { margin: 0; } figcaption { font-size: 0.9em; color: #555; }
img { max-width: 420px; image-rendering: pixelated; border: 1px solid #ccc; display: block; }
.slider { position: relative; display: inline-block; }
.slider img.top { position: absolute; left: 0; top: 0; }
.controls { margin: 0.3em 0; }
";

const SCRIPT: &str = "
document.querySelectorAll('.slider').forEach(function (box) {
  var top = box.querySelector('img.top');
  var range = box.parentNode.querySelector('input[type=range]');
  var label = box.parentNode.querySelector('.showing');
  function show(v) {
    top.style.clipPath = 'inset(0 ' + (100 - v) + '% 0 0)';
    label.textContent = v == 0 ? 'expected' : v == 100 ? 'actual' : 'actual left of ' + v + '%, expected right';
  }
  range.addEventListener('input', function () { show(range.value); });
  box.parentNode.querySelector('button').addEventListener('click', function () {
    range.value = range.value < 50 ? 100 : 0;
    show(range.value);
  });
  show(range.value);
});
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  document.body.dataset.imagesLoaded = String(imgs.length - broken.length);
  document.body.dataset.imagesBroken = String(broken.length);
});
";

/// The page for `files` (each with its images when it failed and was compared).
pub fn page(listing: &Listing, files: &[(&PairDoc, Option<PairImages>)]) -> String {
    let failing: Vec<&(&PairDoc, Option<PairImages>)> = files
        .iter()
        .filter(|(d, _)| d.status != Verdict::Match && !d.updated)
        .collect();
    let count = |v: Verdict| files.iter().filter(|(d, _)| d.status == v).count();
    let fails = !failing.is_empty()
        || (listing.missing_fails && !listing.missing.is_empty())
        || (listing.extra_fails && listing.extra.iter().any(|e| !listing.updated.contains(e)));
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        esc(listing.title),
        esc(listing.title)
    );
    let verdict = if fails {
        "<span class=\"fail\">FAILED</span>"
    } else {
        "<span class=\"pass\">passed</span>"
    };
    let _ = write!(
        h,
        "<table class=\"summary\">\n<tr><td>verdict</td><td id=\"verdict\">{verdict}</td></tr>\n\
         <tr><td>compared</td><td>{}</td></tr>\n<tr><td>match</td><td>{}</td></tr>\n\
         <tr><td>failing</td><td id=\"failing-count\">{}</td></tr>\n\
         <tr><td>unreadable</td><td>{}</td></tr>\n<tr><td>missing</td><td>{}</td></tr>\n\
         <tr><td>extra</td><td>{}</td></tr>\n<tr><td>updated</td><td>{}</td></tr>\n</table>\n",
        files.len(),
        count(Verdict::Match),
        failing.len(),
        count(Verdict::Error),
        listing.missing.len(),
        listing.extra.len(),
        listing.updated.len(),
    );
    if !failing.is_empty() {
        h.push_str("<h2>Failing files</h2>\n<ol class=\"failing\">\n");
        for (i, (d, _)) in failing.iter().enumerate() {
            let _ = writeln!(
                h,
                "<li><a href=\"#pair-{i}\">{}</a>: {}</li>",
                esc(&d.name),
                esc(verdict_word(d.status))
            );
        }
        h.push_str("</ol>\n");
    }
    for (title, list) in [
        ("Missing from ACTUAL", listing.missing),
        ("Extra in ACTUAL", listing.extra),
    ] {
        if !list.is_empty() {
            let _ = writeln!(h, "<h2>{title}</h2>\n<ul>");
            for name in list {
                let note = if listing.updated.contains(name) {
                    " (added to EXPECTED by --update)"
                } else {
                    ""
                };
                let _ = writeln!(h, "<li>{}{note}</li>", esc(name));
            }
            h.push_str("</ul>\n");
        }
    }
    for (i, (d, images)) in failing.iter().enumerate() {
        pair_section(&mut h, i, d, images.as_ref());
    }
    let _ = write!(h, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
    h
}

/// One failing pair: its name, metrics, images and the slider.
fn pair_section(h: &mut String, i: usize, d: &PairDoc, images: Option<&PairImages>) {
    let _ = writeln!(
        h,
        "<section class=\"pair\" id=\"pair-{i}\" data-name=\"{}\">\n<h2>{} <span class=\"fail\">{}</span></h2>",
        esc(&d.name),
        esc(&d.name),
        esc(verdict_word(d.status))
    );
    h.push_str("<table class=\"metrics\">\n");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(h, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    };
    row("expected", d.expected.clone());
    row("actual", d.actual.clone());
    if let Some(r) = &d.reason {
        row("reason", r.clone());
    }
    if let Some(m) = &d.metrics {
        row(
            "differing pixels",
            format!(
                "{} of {} ({:.4}%)",
                m.differing,
                m.compared,
                m.differing_fraction * 100.0
            ),
        );
        if m.ignored > 0 {
            row("ignored pixels", m.ignored.to_string());
        }
        if m.antialiased > 0 {
            row("anti-aliased pixels", m.antialiased.to_string());
        }
        if m.outside > 0 {
            row("pixels only one image has", m.outside.to_string());
        }
        row("max diff", m.max_abs_diff.to_string());
        row("MAE / RMSE", format!("{:.4} / {:.4}", m.mae, m.rmse));
        row(
            "PSNR",
            m.psnr.map_or("inf".to_string(), |p| format!("{p:.2} dB")),
        );
        if let Some(s) = m.ssim {
            row("SSIM", format!("{s:.6}"));
        }
    }
    if !d.failed.is_empty() {
        let names: Vec<String> = d
            .failed
            .iter()
            .filter_map(|f| serde_json::to_value(f).ok()?.as_str().map(str::to_string))
            .collect();
        row("failed limits", names.join(", "));
    }
    if let Some(r) = &d.regions {
        let boxes: Vec<String> = r
            .iter()
            .take(5)
            .map(|r| format!("{}:{}-{}:{} ({} px)", r.x1, r.y1, r.x2, r.y2, r.pixels))
            .collect();
        let more = d.regions_total.unwrap_or(0).saturating_sub(boxes.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        row("regions", format!("{}{more}", boxes.join(", ")));
    }
    h.push_str("</table>\n");
    if let Some(img) = images {
        let (e, a) = (href(&img.expected), href(&img.actual));
        h.push_str("<div class=\"images\">\n");
        let _ = writeln!(
            h,
            "<figure><img src=\"{e}\" alt=\"expected\"><figcaption>expected</figcaption></figure>"
        );
        let _ = writeln!(
            h,
            "<figure><img src=\"{a}\" alt=\"actual\"><figcaption>actual</figcaption></figure>"
        );
        if let Some(diff) = &img.diff {
            let _ = writeln!(
                h,
                "<figure><img src=\"{}\" alt=\"diff\"><figcaption>diff: red differs, \
                 yellow anti-aliased</figcaption></figure>",
                href(diff)
            );
        }
        let _ = writeln!(
            h,
            "<figure class=\"compare\"><div class=\"slider\"><img src=\"{e}\" alt=\"expected\">\
             <img class=\"top\" src=\"{a}\" alt=\"actual\"></div>\
             <div class=\"controls\"><input type=\"range\" min=\"0\" max=\"100\" value=\"50\" \
             aria-label=\"actual / expected\"> <button type=\"button\">toggle</button></div>\
             <figcaption>slider: <span class=\"showing\"></span></figcaption></figure>"
        );
        h.push_str("</div>\n");
    }
    h.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_paths_encoded() {
        assert_eq!(esc("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
        assert_eq!(href("images/0001 x#.png"), "images/0001%20x%23.png");
    }
}
