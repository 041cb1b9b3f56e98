//! Number and text formatting shared by every table, chart and export.

/// Text made safe for HTML and SVG (element text and quoted attributes):
/// the same escaping the report template applies to its own values.
pub fn escape_html(s: &str) -> String {
    minijinja::HtmlEscape(s).to_string()
}

/// One CSV field (RFC 4180): quoted when it holds a comma, a quote or a
/// line break, quotes doubled.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A case's mean as the compare and scale tables show it: four significant
/// digits, then why it may not be trusted: not converged, or the load
/// generator was the bottleneck (macro workloads).
pub fn mean_marked(mean: f64, converged: bool, load_bound: bool) -> String {
    let mut text = sig(mean, 4);
    if !converged {
        text.push_str(" (NOT CONVERGED)");
    }
    if load_bound {
        text.push_str(" (LOAD-BOUND)");
    }
    text
}

/// `x` with `digits` significant digits, without exponent notation:
/// 0.1234, 12.35, 1235, 64890.
pub fn sig(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "–".into()
        } else if x > 0.0 {
            "∞".into()
        } else {
            "-∞".into()
        };
    }
    if x == 0.0 {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (digits as i32 - 1 - mag).max(0) as usize;
    if decimals == 0 {
        let scale = 10f64.powi(mag + 1 - digits as i32);
        return format!("{:.0}", (x / scale).round() * scale);
    }
    format!("{:.*}", decimals, x)
}

/// A ratio as a whole percentage, as in the seed's tables.
pub fn pct(r: f64) -> String {
    if r.is_finite() {
        format!("{:.0}%", r * 100.0)
    } else {
        "–".into()
    }
}

/// A change in percent with its sign: `+10.2 %`, `-3.14 %`, `0 %`.
pub fn signed_pct(x: f64) -> String {
    format!("{}{} %", if x > 0.0 { "+" } else { "" }, sig(x, 3))
}

/// A p-value: small ones in exponent notation rather than a row of zeros.
pub fn p_value(p: f64) -> String {
    if p > 0.0 && p < 0.001 {
        format!("{p:.1e}")
    } else {
        sig(p, 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits() {
        assert_eq!(sig(0.123456, 4), "0.1235");
        assert_eq!(sig(12.3456, 4), "12.35");
        assert_eq!(sig(1234.56, 4), "1235");
        assert_eq!(sig(64894.0, 4), "64890");
        assert_eq!(sig(0.0006112, 4), "0.0006112");
        assert_eq!(sig(-2.5, 4), "-2.500");
        assert_eq!(sig(0.0, 4), "0");
        assert_eq!(sig(f64::NAN, 4), "–");
        assert_eq!(pct(1.08), "108%");
        assert_eq!(signed_pct(10.24), "+10.2 %");
        assert_eq!(signed_pct(-3.456), "-3.46 %");
        assert_eq!(p_value(0.005), "0.0050");
        assert_eq!(p_value(0.00002), "2.0e-5");
    }

    #[test]
    fn escaping() {
        assert_eq!(
            escape_html(r#"<img src=x onerror="a('b')">&"#),
            "&lt;img src=x onerror=&quot;a(&#x27;b&#x27;)&quot;&gt;&amp;"
        );
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
