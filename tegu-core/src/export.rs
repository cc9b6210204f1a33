//! Graph export: Graphviz DOT and Mermaid.

use std::fmt::Write;

use crate::graph::{Graph, Resolved, Target};
use crate::proto::descriptor::short_type_name;
use crate::proto::kinds::Lifetime;

struct Edge<'a> {
    from: usize,
    to: usize,
    label: &'a str,
    lazy: bool,
}

fn edges(graph: &Graph) -> Vec<Edge<'_>> {
    let mut out = Vec::new();
    for (from, deps) in graph.resolved.iter().enumerate() {
        for (dep, resolved) in graph.protos[from].deps.iter().zip(deps) {
            let label = dep.field.unwrap_or("");
            let mut push = |to: usize, lazy: bool| out.push(Edge { from, to, label, lazy });
            match resolved {
                Resolved::One(t) | Resolved::Maybe(Some(t)) => push(t.proto, false),
                Resolved::Many(ts) => ts.iter().for_each(|t| push(t.proto, false)),
                Resolved::Context(Target { proto: p, .. }) | Resolved::Provider(p) => push(*p, true),
                Resolved::Maybe(None) => {}
            }
        }
    }
    out
}

pub(crate) fn dot(graph: &Graph) -> String {
    let mut s = String::from("digraph di {\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n");
    for (i, p) in graph.protos.iter().enumerate() {
        let shape = if p.scope == Lifetime::Singleton { "box" } else { "ellipse" };
        let _ = writeln!(
            s,
            "  n{i} [label=\"{}\\n{}\" shape={shape} tooltip=\"{}\"];",
            esc(short_type_name(p.type_name())),
            esc(&p.name),
            esc(p.type_name())
        );
    }
    for e in edges(graph) {
        let style = if e.lazy { " style=dashed" } else { "" };
        let _ = writeln!(s, "  n{} -> n{} [label=\"{}\"{style}];", e.from, e.to, esc(e.label));
    }
    s.push_str("}\n");
    s
}

pub(crate) fn mermaid(graph: &Graph) -> String {
    let mut s = String::from("flowchart LR\n");
    for (i, p) in graph.protos.iter().enumerate() {
        let (open, close) = if p.scope == Lifetime::Singleton { ("[", "]") } else { ("([", "])") };
        let _ = writeln!(s, "  n{i}{open}\"{}<br/>{}\"{close}", mesc(short_type_name(p.type_name())), mesc(&p.name));
    }
    for e in edges(graph) {
        let arrow = if e.lazy { "-.->" } else { "-->" };
        if e.label.is_empty() {
            let _ = writeln!(s, "  n{} {arrow} n{}", e.from, e.to);
        } else {
            let _ = writeln!(s, "  n{} {arrow}|{}| n{}", e.from, mesc(e.label), e.to);
        }
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn mesc(s: &str) -> String {
    s.replace('"', "#quot;").replace('<', "#lt;").replace('>', "#gt;")
}
