//! The sweep's charts as SVG text (plotters' SVG backend: no font files,
//! no system libraries, the same bytes for the same rows).
//!
//! * [`jct_vs_load`]: avg JCT against offered load, one line per policy
//!   (the paper's Fig. 13 shape), mean over seeds, first queue of the grid;
//!   [`vs_load`] draws the other figures of [`LOAD_CHARTS`] the same way
//!   (Titan's Exp#1-3: servers in use, machine fragmentation, cross-server
//!   traffic).
//! * [`times`]: avg JWT, JRT and JCT per policy as grouped bars at the
//!   highest load (the paper's Table 5/6 as a picture).

use plotters::prelude::*;

use super::{means, Grid, Row};
use crate::replay::Report;

/// Why a chart could not be drawn (plotters' error, as text).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the {chart} chart: {reason}")]
pub struct ChartError {
    pub chart: &'static str,
    pub reason: String,
}

const SIZE: (u32, u32) = (800, 500);

/// A fixed colour per policy position (Tableau 10, colour-blind friendly).
fn colour(i: usize) -> RGBColor {
    const T10: [(u8, u8, u8); 10] = [
        (78, 121, 167),
        (242, 142, 43),
        (225, 87, 89),
        (118, 183, 178),
        (89, 161, 79),
        (237, 201, 72),
        (176, 122, 161),
        (255, 157, 167),
        (156, 117, 95),
        (186, 176, 172),
    ];
    let (r, g, b) = T10[i % T10.len()];
    RGBColor(r, g, b)
}

fn err(chart: &'static str) -> impl Fn(String) -> ChartError {
    move |reason| ChartError { chart, reason }
}

/// Avg JCT against load, one line per policy.
pub fn jct_vs_load(rows: &[Row], grid: &Grid) -> Result<String, ChartError> {
    vs_load(rows, grid, &LOAD_CHARTS[0])
}

/// A figure against offered load, one line per policy (mean over seeds).
#[derive(Debug, Clone, Copy)]
pub struct LoadChart {
    /// The file `vclos sweep` writes it to.
    pub file: &'static str,
    pub title: &'static str,
    pub y: &'static str,
    pub metric: Metric,
}

/// The charts against load `vclos sweep` draws: avg JCT, and Titan's
/// Exp#1-3 figures (seed 002, Section V: used machines, machine
/// fragmentation, cross-machine traffic).
pub const LOAD_CHARTS: [LoadChart; 4] = [
    LoadChart {
        file: "jct_vs_load.svg",
        title: "avg JCT vs offered load",
        y: "avg JCT (s)",
        metric: |r| r.avg_jct_s,
    },
    LoadChart {
        file: "used_servers_vs_load.svg",
        title: "servers in use (time average) vs offered load",
        y: "servers in use",
        metric: |r| r.avg_used_servers.unwrap_or(0.0),
    },
    LoadChart {
        file: "machine_fragmentation_vs_load.svg",
        title: "machine fragmentation (idle share of used servers) vs offered load",
        y: "machine fragmentation",
        metric: |r| r.machine_fragmentation.unwrap_or(0.0),
    },
    LoadChart {
        file: "cross_server_traffic_vs_load.svg",
        title: "cross-server traffic (time average) vs offered load",
        y: "vectors in flight between servers",
        metric: |r| r.cross_server_traffic.unwrap_or(0.0),
    },
];

/// `chart`'s figure against load, one line per policy.
pub fn vs_load(rows: &[Row], grid: &Grid, chart: &LoadChart) -> Result<String, ChartError> {
    let queue = grid.queues.first().copied().unwrap_or_default();
    let lines: Vec<(String, Vec<(f64, f64)>)> = means(rows, grid, queue, chart.metric)
        .into_iter()
        .map(|(p, points)| (p.to_string(), points))
        .collect();
    let x = grid
        .loads
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &l| (a.min(l), b.max(l)));
    let caption = format!("{} ({queue})", chart.title);
    line_chart(chart.title, &caption, ("offered load", chart.y), x, &lines)
}

/// Lines of (x, y) points over `x` = (min, max), y from 0, with a legend;
/// `name` names the chart in errors.
pub fn line_chart(
    name: &'static str,
    caption: &str,
    (x_desc, y_desc): (&str, &str),
    (x0, x1): (f64, f64),
    lines: &[(String, Vec<(f64, f64)>)],
) -> Result<String, ChartError> {
    let fail = err(name);
    let (x0, x1) = if x0 < x1 {
        (x0, x1)
    } else {
        (x0 - 0.1, x0 + 0.1)
    };
    let top = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(x0..x1, 0.0..top)
            .map_err(|e| fail(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(|e| fail(e.to_string()))?;
        for (i, (label, points)) in lines.iter().enumerate() {
            let c = colour(i);
            chart
                .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                .map_err(|e| fail(e.to_string()))?
                .label(label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled())))
                .map_err(|e| fail(e.to_string()))?;
        }
        legend(&mut chart).map_err(&fail)?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    Ok(svg)
}

/// The legend box, top left.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// A figure of a report.
pub type Metric = fn(&Report) -> f64;

/// The three times of a report, in bar order.
const TIMES: [(&str, Metric); 3] = [
    ("avg JWT", |r| r.avg_jwt_s),
    ("avg JRT", |r| r.avg_jrt_s),
    ("avg JCT", |r| r.avg_jct_s),
];

/// Slots per policy group on the x axis of [`times`].
const SLOTS: i32 = 4;

/// Avg JWT, JRT and JCT per policy at the highest load, grouped bars.
pub fn times(rows: &[Row], grid: &Grid) -> Result<String, ChartError> {
    let fail = err("times");
    let queue = grid.queues.first().copied().unwrap_or_default();
    let load = grid.loads.iter().copied().fold(f64::MIN, f64::max);
    // values[policy][time]
    let values: Vec<Vec<f64>> = TIMES
        .iter()
        .map(|(_, f)| {
            means(rows, grid, queue, f)
                .into_iter()
                .map(|(_, pts)| pts.iter().find(|p| p.0 == load).map_or(0.0, |p| p.1))
                .collect::<Vec<f64>>()
        })
        .collect();
    let top = values
        .iter()
        .flatten()
        .fold(0.0, |a: f64, &b| a.max(b))
        .max(1.0)
        * 1.1;
    let groups = grid.policies.len();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        let names: Vec<String> = grid.policies.iter().map(|p| p.to_string()).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("avg JWT / JRT / JCT per policy, load {load} ({queue})"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            // Four slots per policy: its three bars and a gap.
            .build_cartesian_2d(0..SLOTS * groups as i32, 0.0..top)
            .map_err(|e| fail(e.to_string()))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(SLOTS as usize * groups + 1)
            .x_label_formatter(&|&x| match x % SLOTS {
                // Under the middle bar of each group.
                1 => names
                    .get((x / SLOTS) as usize)
                    .map_or(String::new(), |n| n.to_string()),
                _ => String::new(),
            })
            .y_desc("seconds")
            .draw()
            .map_err(|e| fail(e.to_string()))?;
        for (t, (label, _)) in TIMES.iter().enumerate() {
            let c = colour(t);
            let bars = values[t].iter().enumerate().map(move |(g, &v)| {
                let x = SLOTS * g as i32 + t as i32;
                Rectangle::new([(x, 0.0), (x + 1, v)], c.filled())
            });
            chart
                .draw_series(bars)
                .map_err(|e| fail(e.to_string()))?
                .label(*label)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        legend(&mut chart).map_err(&fail)?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    Ok(svg)
}
