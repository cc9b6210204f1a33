//! Line charts as SVG, written by hand: log-scale x, linear or log-scale y, one polyline per
//! series, a legend. Enough for requests/s against N and penalty against depth.

use std::fmt::Write;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend.
    pub label: String,
    /// `(x, y)` points, x ascending.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (for figures from elsewhere, such as tegg's published ones).
    pub dashed: bool,
}

/// A chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// The title.
    pub title: String,
    /// The x axis label.
    pub x_label: String,
    /// The y axis label.
    pub y_label: String,
    /// Log-scale x (otherwise linear).
    pub log_x: bool,
    /// Log-scale y (otherwise linear from 0 or the lowest negative value).
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
const W: f64 = 760.0;
const H: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 250.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Axis {
    fn new(log: bool, values: impl Iterator<Item = f64>) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = (1.0, 10.0);
        }
        if log {
            Axis {
                log,
                lo: 10f64.powf(lo.log10().floor()),
                hi: 10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0)),
            }
        } else {
            let lo = lo.min(0.0);
            let hi = if hi <= lo { lo + 1.0 } else { hi * 1.1 };
            Axis { log, lo, hi }
        }
    }

    /// 0..1 along the axis.
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (self.lo.log10().round() as i32, self.hi.log10().round() as i32);
            (a..=b).map(|e| 10f64.powi(e)).collect()
        } else {
            let step = nice_step((self.hi - self.lo) / 5.0);
            let mut v = (self.lo / step).ceil() * step;
            let mut out = Vec::new();
            while v <= self.hi + step * 1e-9 {
                out.push(v);
                v += step;
            }
            out
        }
    }
}

fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag)
}

fn label(v: f64) -> String {
    // A tick computed as -0.0 reads "0".
    let v = if v.abs() < 1e-9 { 0.0 } else { v };
    match v.abs() {
        a if a >= 1e6 => format!("{}M", v / 1e6),
        a if a >= 1e3 => format!("{}k", v / 1e3),
        _ => format!("{v}"),
    }
}

impl Chart {
    /// The SVG document.
    pub fn svg(&self) -> String {
        let x = Axis::new(self.log_x, self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
        let y = Axis::new(self.log_y, self.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let px = |v: f64| LEFT + x.frac(v) * pw;
        let py = |v: f64| TOP + (1.0 - y.frac(v)) * ph;
        let mut s = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n",
            LEFT + pw / 2.0,
            escape(&self.title)
        );
        for t in x.ticks() {
            let _ = writeln!(
                s,
                "<line x1=\"{0:.1}\" y1=\"{1}\" x2=\"{0:.1}\" y2=\"{2}\" stroke=\"#ddd\"/><text x=\"{0:.1}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>",
                px(t),
                TOP,
                TOP + ph,
                TOP + ph + 16.0,
                label(t)
            );
        }
        for t in y.ticks() {
            let _ = writeln!(
                s,
                "<line x1=\"{0}\" y1=\"{1:.1}\" x2=\"{2}\" y2=\"{1:.1}\" stroke=\"#ddd\"/><text x=\"{3}\" y=\"{4:.1}\" text-anchor=\"end\">{5}</text>",
                LEFT,
                py(t),
                LEFT + pw,
                LEFT - 6.0,
                py(t) + 4.0,
                label(t)
            );
        }
        let _ = writeln!(
            s,
            "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#333\"/>\n<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n<text transform=\"translate(18,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            LEFT + pw / 2.0,
            H - 12.0,
            escape(&self.x_label),
            TOP + ph / 2.0,
            escape(&self.y_label)
        );
        for (i, series) in self.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let dash = if series.dashed { " stroke-dasharray=\"6 4\"" } else { "" };
            let points: Vec<String> = series
                .points
                .iter()
                .filter(|(a, b)| a.is_finite() && b.is_finite() && (!self.log_y || *b > 0.0))
                .map(|&(a, b)| format!("{:.1},{:.1}", px(a), py(b)))
                .collect();
            let _ = writeln!(
                s,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
                points.join(" ")
            );
            for p in &points {
                let (a, b) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(s, "<circle cx=\"{a}\" cy=\"{b}\" r=\"3\" fill=\"{color}\"/>");
            }
            let ly = TOP + 10.0 + i as f64 * 18.0;
            let lx = LEFT + pw + 12.0;
            let _ = writeln!(
                s,
                "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{}\">{}</text>",
                lx + 22.0,
                lx + 28.0,
                ly + 4.0,
                escape(&series.label)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_places_points_inside_the_plot() {
        let chart = Chart {
            title: "rps <by> N".into(),
            x_label: "N".into(),
            y_label: "requests/s".into(),
            log_x: true,
            log_y: true,
            series: vec![Series { label: "a".into(), points: vec![(1.0, 100.0), (10_000.0, 1e5)], dashed: false }],
        };
        let svg = chart.svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("rps &lt;by&gt; N"));
        // x from 1 to 10^4 on a log axis: the first point at the left edge, the last at the right.
        assert!(svg.contains(&format!(
            "points=\"{:.1},{:.1} {:.1},{:.1}\"",
            LEFT,
            TOP + (H - TOP - BOTTOM),
            W - RIGHT,
            TOP
        )));
    }

    #[test]
    fn linear_ticks_are_round() {
        let axis = Axis::new(false, [0.0, 0.93].into_iter());
        assert_eq!(axis.ticks(), [0.0, 0.5, 1.0]);
        let axis = Axis::new(false, [0.0, 37.0].into_iter());
        assert_eq!(axis.ticks(), [0.0, 10.0, 20.0, 30.0, 40.0]);
    }
}
