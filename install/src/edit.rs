//! Format-preserving edits of the harnesses' JSON hook configs.
//!
//! A file is first parsed strictly (`serde_json`); one that does not parse
//! is refused with its line and column. Edits then go through a concrete
//! syntax tree (`jsonc-parser`'s CST), so every byte that is not one of our
//! entries (other keys, other hooks, their order, indentation, spacing)
//! stays exactly as it was. New entries take the file's own indentation.
//!
//! Edits are splices of the original text, computed in one pass over its
//! syntax tree (`jsonc-parser`'s AST, which keeps byte ranges): appending an
//! element inserts `,<separator><element>` after the last one (the
//! separator and indentation copied from the container), removing it deletes
//! exactly that span, so an uninstall after an install gives back the same
//! bytes. An inline container (`[{...}]`) gets an inline element.
//!
//! Our entries are recognised by their command: the program (first shell
//! word) is one of our binaries for that harness, in any directory.

use crate::table;
use jsonc_parser::ast::{Array, Object, Value as Ast};
use jsonc_parser::{CollectOptions, CommentCollectionStrategy, ParseOptions, parse_to_ast};
use preloop_shared::Harness;
use serde_json::Value;

/// Why a config cannot be edited (shown with the file's path).
pub type EditError = String;

/// Parse strictly; the error names line and column.
pub fn parse_strict(text: &str) -> Result<Value, EditError> {
    serde_json::from_str::<Value>(text).map_err(|e| format!("line {}, column {}: {e}", e.line(), e.column()))
}

/// Quote a path for the POSIX shell every harness runs hook commands with.
/// Plain paths stay bare; anything else is single-quoted.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_./+-:@%=,".contains(&b));
    if plain { s.to_string() } else { format!("'{}'", s.replace('\'', r"'\''")) }
}

/// The first word of a shell command, unquoted (`'a b'/c`, `"a b"`, `a\ b`).
pub fn first_word(cmd: &str) -> String {
    let mut out = String::new();
    let mut chars = cmd.trim_start().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    out.push(c);
                }
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                out.push(n);
                            }
                        }
                        _ => out.push(c),
                    }
                }
            }
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            c if c.is_whitespace() || c == ';' || c == '&' || c == '|' => break,
            _ => out.push(c),
        }
    }
    out
}

/// Whether a hook command runs one of our binaries for `harness`.
pub fn is_ours(harness: Harness, command: &str) -> bool {
    let prog = first_word(command);
    let name = prog.rsplit('/').next().unwrap_or("");
    table::is_our_binary(harness, name)
}

/// The program path of one of our commands.
pub fn program_of(command: &str) -> String {
    first_word(command)
}

/// What we want in a file: per event, the entry (Claude/Codex: the handler
/// object; Cursor: the flat entry). Empty means uninstall.
pub type Desired = Vec<(String, Value)>;

fn span(v: &Ast) -> (usize, usize) {
    let r = match v {
        Ast::StringLit(x) => x.range,
        Ast::NumberLit(x) => x.range,
        Ast::BooleanLit(x) => x.range,
        Ast::Object(x) => x.range,
        Ast::Array(x) => x.range,
        Ast::NullKeyword(x) => x.range,
    };
    (r.start, r.end)
}

fn prop<'a, 'b>(o: &'b Object<'a>, key: &str) -> Option<(usize, &'b Ast<'a>)> {
    o.properties.iter().position(|p| p.name.as_str() == key).map(|i| (i, &o.properties[i].value))
}

/// A container's brackets and its members' byte ranges.
struct Container {
    open: usize,
    close: usize,
    elems: Vec<(usize, usize)>,
}

impl Container {
    fn array(a: &Array) -> Container {
        Container { open: a.range.start, close: a.range.end - 1, elems: a.elements.iter().map(span).collect() }
    }
    fn object(o: &Object) -> Container {
        Container {
            open: o.range.start,
            close: o.range.end - 1,
            elems: o.properties.iter().map(|p| (p.range.start, p.range.end)).collect(),
        }
    }
}

/// A member to add: an array element or an object property.
enum Item {
    Elem(Value),
    Prop(String, Value),
}

/// The original text and the splices to make in it.
struct Splicer<'t> {
    text: &'t str,
    nl: &'static str,
    unit: String,
    /// A one-line document: new members go inline too.
    compact: bool,
    edits: Vec<(usize, usize, String)>,
}

impl<'t> Splicer<'t> {
    fn new(text: &'t str) -> Splicer<'t> {
        let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let unit = text
            .lines()
            .find_map(|l| {
                let ws: String = l.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
                (!ws.is_empty() && l.len() > ws.len()).then_some(ws)
            })
            .unwrap_or_else(|| "  ".to_string());
        let compact = !text.trim_end().contains('\n') && text.trim() != "{}";
        Splicer { text, nl, unit, compact, edits: Vec::new() }
    }

    /// The whitespace that starts the line holding `pos`.
    fn line_indent(&self, pos: usize) -> String {
        let start = self.text[..pos].rfind('\n').map(|i| i + 1).unwrap_or(0);
        self.text[start..].chars().take_while(|c| *c == ' ' || *c == '\t').collect()
    }

    fn pretty(&self, v: &Value, indent: &str) -> String {
        let mut buf = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(self.unit.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
        serde::Serialize::serialize(v, &mut ser).expect("a JSON value serializes");
        String::from_utf8(buf).unwrap_or_default().replace('\n', &format!("{}{indent}", self.nl))
    }

    fn item(&self, it: &Item, indent: Option<&str>) -> String {
        let val = |v: &Value| match indent {
            Some(i) => self.pretty(v, i),
            None => inline(v),
        };
        match it {
            Item::Elem(v) => val(v),
            Item::Prop(k, v) => format!("{}: {}", serde_json::to_string(k).unwrap_or_default(), val(v)),
        }
    }

    fn replace_value(&mut self, (start, end): (usize, usize), v: &Value) {
        let old = &self.text[start..end];
        let new = if old.contains('\n') { self.pretty(v, &self.line_indent(start)) } else { inline(v) };
        self.edits.push((start, end, new));
    }

    /// Remove the members flagged in `removed`, put `prepend` before the
    /// first member left and `append` after the last, in the container's
    /// own style. An emptied container becomes `[]` / `{}`.
    fn container(&mut self, c: &Container, removed: &[bool], prepend: Vec<Item>, append: Vec<Item>) {
        let n = c.elems.len();
        let kept: Vec<usize> = (0..n).filter(|i| !removed.get(*i).copied().unwrap_or(false)).collect();
        let mut items = prepend;
        let appended_at = items.len();
        items.extend(append);
        if kept.is_empty() {
            if items.is_empty() {
                if n > 0 {
                    self.edits.push((c.open + 1, c.close, String::new()));
                }
                return;
            }
            let inner = if self.compact {
                items.iter().map(|it| self.item(it, None)).collect::<Vec<_>>().join(", ")
            } else {
                let cind = self.line_indent(c.open);
                let ind = format!("{cind}{}", self.unit);
                let body = items
                    .iter()
                    .map(|it| self.item(it, Some(&ind)))
                    .collect::<Vec<_>>()
                    .join(&format!(",{}{ind}", self.nl));
                format!("{nl}{ind}{body}{nl}{cind}", nl = self.nl)
            };
            self.edits.push((c.open + 1, c.close, inner));
            return;
        }
        // Runs of removed members.
        let mut i = 0;
        while i < n {
            if kept.contains(&i) {
                i += 1;
                continue;
            }
            let mut j = i;
            while j < n && !kept.contains(&j) {
                j += 1;
            }
            if i > 0 {
                self.edits.push((c.elems[i - 1].1, c.elems[j - 1].1, String::new()));
            } else {
                self.edits.push((c.elems[0].0, c.elems[j].0, String::new()));
            }
            i = j;
        }
        if items.is_empty() {
            return;
        }
        let first = c.elems[kept[0]];
        let multiline = self.text[c.open + 1..c.elems[0].0].contains('\n');
        let (sep, indent) = if multiline {
            let ind = self.line_indent(first.0);
            (format!(",{}{ind}", self.nl), Some(ind))
        } else {
            let between = if n >= 2 { &self.text[c.elems[0].1..c.elems[1].0] } else { ", " };
            let sep =
                if between.trim() == "," && !between.contains('\n') { between.to_string() } else { ", ".to_string() };
            (sep, None)
        };
        let formatted: Vec<String> = items.iter().map(|it| self.item(it, indent.as_deref())).collect();
        let (pre, post) = formatted.split_at(appended_at);
        if !pre.is_empty() {
            let text = pre.join(&sep) + &sep;
            self.edits.push((first.0, first.0, text));
        }
        if !post.is_empty() {
            let last = c.elems[*kept.last().expect("kept is not empty")].1;
            let text = sep.clone() + &post.join(&sep);
            self.edits.push((last, last, text));
        }
    }

    fn finish(mut self) -> String {
        // Later splices first; at one position, a removal before an insertion.
        self.edits.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        let mut out = self.text.to_string();
        for (s, e, t) in self.edits {
            out.replace_range(s..e, &t);
        }
        out
    }
}

/// `{"k": v, "a": [1, 2]}`: one line, with a space after `:` and `,`.
fn inline(v: &Value) -> String {
    match v {
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}: {}", serde_json::to_string(k).unwrap_or_default(), inline(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

fn value_of(text: &str, (s, e): (usize, usize)) -> Option<Value> {
    serde_json::from_str(&text[s..e]).ok()
}

fn command_of<'a>(v: &'a Ast<'a>) -> Option<&'a str> {
    let Ast::Object(o) = v else { return None };
    match prop(o, "command")? {
        (_, Ast::StringLit(s)) => Some(&s.value),
        _ => None,
    }
}

/// Whether an existing command runs the same binary as a wanted entry.
fn same_binary(command: &str, want: &Value) -> bool {
    let name = |c: &str| program_of(c).rsplit('/').next().unwrap_or("").to_string();
    want.get("command").and_then(Value::as_str).is_some_and(|w| name(w) == name(command))
}

fn parse_ast(text: &str) -> Result<Option<Ast<'_>>, EditError> {
    let opts = CollectOptions { comments: CommentCollectionStrategy::Off, tokens: false };
    parse_to_ast(text, &opts, &ParseOptions::default()).map(|r| r.value).map_err(|e| e.to_string())
}

/// Claude Code `settings.json` and Codex `hooks.json`:
/// `{"hooks": {"<Event>": [{"matcher"?: .., "hooks": [<handler>, ..]}, ..]}}`.
/// Our handler sits alone in a group without a matcher, appended after the
/// user's groups.
pub fn edit_grouped(text: &str, harness: Harness, desired: &Desired) -> Result<String, EditError> {
    let fresh = text.trim().is_empty();
    if fresh && desired.is_empty() {
        return Ok(text.to_string());
    }
    let source = if fresh { "{}" } else { text };
    parse_strict(source)?;
    let ast = parse_ast(source)?;
    let Some(Ast::Object(root)) = &ast else { return Err("the top level is not a JSON object".into()) };
    let mut sp = Splicer::new(source);
    let group = |w: &Value| serde_json::json!({"hooks": [w]});
    let Some((hooks_idx, hooks_val)) = prop(root, "hooks") else {
        if desired.is_empty() {
            return Ok(text.to_string());
        }
        let mut events = serde_json::Map::new();
        for (e, w) in desired {
            if let Value::Array(groups) = events.entry(e.clone()).or_insert_with(|| Value::Array(Vec::new())) {
                groups.push(group(w));
            }
        }
        sp.container(&Container::object(root), &[], vec![], vec![Item::Prop("hooks".into(), Value::Object(events))]);
        return Ok(finish(text, sp.finish()));
    };
    let Ast::Object(hooks) = hooks_val else { return Err("\"hooks\" is not an object".into()) };
    let mut prop_removed = vec![false; hooks.properties.len()];
    let mut removed_any = false;
    for (pi, p) in hooks.properties.iter().enumerate() {
        let event = p.name.as_str();
        // Our entries for this event (Claude Code's Stop has two: the hook and the watcher).
        let want: Vec<&Value> = desired.iter().filter(|(e, _)| e == event).map(|(_, v)| v).collect();
        let Ast::Array(arr) = &p.value else {
            if !want.is_empty() {
                return Err(format!("\"hooks.{event}\" is not an array"));
            }
            continue;
        };
        let mut group_removed = vec![false; arr.elements.len()];
        let mut kept = vec![false; want.len()];
        for (gi, g) in arr.elements.iter().enumerate() {
            let Ast::Object(go) = g else { continue };
            let Some((_, Ast::Array(handlers))) = prop(go, "hooks") else { continue };
            let plain = prop(go, "matcher").is_none() && handlers.elements.len() == 1;
            let mut handler_removed = vec![false; handlers.elements.len()];
            for (hi, h) in handlers.elements.iter().enumerate() {
                let Some(cmd) = command_of(h).filter(|c| is_ours(harness, c)) else { continue };
                // The wanted entry for the same binary, if not placed yet.
                let slot = want.iter().enumerate().position(|(wi, w)| !kept[wi] && same_binary(cmd, w));
                match slot {
                    Some(wi) if plain => {
                        kept[wi] = true;
                        if value_of(source, span(h)).as_ref() != Some(want[wi]) {
                            sp.replace_value(span(h), want[wi]);
                        }
                    }
                    _ => handler_removed[hi] = true,
                }
            }
            if handler_removed.iter().all(|r| *r) && handler_removed.iter().any(|r| *r) {
                group_removed[gi] = true;
            } else if handler_removed.iter().any(|r| *r) {
                sp.container(&Container::array(handlers), &handler_removed, vec![], vec![]);
                removed_any = true;
            }
        }
        let any_group = group_removed.iter().any(|r| *r);
        removed_any |= any_group;
        let all_groups = !arr.elements.is_empty() && group_removed.iter().all(|r| *r);
        let missing: Vec<Item> =
            want.iter().zip(&kept).filter(|(_, k)| !**k).map(|(w, _)| Item::Elem(group(w))).collect();
        if !missing.is_empty() {
            sp.container(&Container::array(arr), &group_removed, vec![], missing);
        } else if want.is_empty() && all_groups {
            prop_removed[pi] = true;
        } else if any_group {
            sp.container(&Container::array(arr), &group_removed, vec![], vec![]);
        }
    }
    let mut new_events: Vec<Item> = Vec::new();
    for (e, w) in desired.iter().filter(|(e, _)| !hooks.properties.iter().any(|p| p.name.as_str() == e)) {
        match new_events.iter_mut().find(|i| matches!(i, Item::Prop(name, _) if name == e)) {
            Some(Item::Prop(_, Value::Array(groups))) => groups.push(group(w)),
            _ => new_events.push(Item::Prop(e.clone(), Value::Array(vec![group(w)]))),
        }
    }
    if desired.is_empty() && removed_any && prop_removed.iter().all(|r| *r) {
        // Only ours was in "hooks": the key goes too.
        let mut root_removed = vec![false; root.properties.len()];
        root_removed[hooks_idx] = true;
        sp.container(&Container::object(root), &root_removed, vec![], vec![]);
    } else {
        sp.container(&Container::object(hooks), &prop_removed, vec![], new_events);
    }
    Ok(finish(text, sp.finish()))
}

/// Cursor `hooks.json`: `{"version": 1, "hooks": {"<event>": [<entry>, ..]}}`.
/// Never removes `version` or `hooks`: an emptied file stays
/// `{"version":1,"hooks":{}}` (deleting it does not unload hooks in Cursor).
pub fn edit_flat(text: &str, harness: Harness, desired: &Desired) -> Result<String, EditError> {
    let fresh = text.trim().is_empty();
    if fresh && desired.is_empty() {
        return Ok(text.to_string());
    }
    for (e, _) in desired {
        if !table::CURSOR_KNOWN_EVENTS.contains(&e.as_str()) {
            return Err(format!("internal: {e} is not an event Cursor knows"));
        }
    }
    let source = if fresh { "{}" } else { text };
    parse_strict(source)?;
    let ast = parse_ast(source)?;
    let Some(Ast::Object(root)) = &ast else { return Err("the top level is not a JSON object".into()) };
    let mut sp = Splicer::new(source);
    let mut prepend = Vec::new();
    match prop(root, "version") {
        Some((_, v)) if value_of(source, span(v)).and_then(|v| v.as_u64()) == Some(1) => {}
        Some((_, v)) => {
            return Err(format!("unsupported \"version\": {} (only 1 is known)", &source[span(v).0..span(v).1]));
        }
        None if !desired.is_empty() => prepend.push(Item::Prop("version".into(), Value::from(1))),
        None => {}
    }
    let Some((_, hooks_val)) = prop(root, "hooks") else {
        if desired.is_empty() {
            return Ok(text.to_string());
        }
        let events: serde_json::Map<String, Value> =
            desired.iter().map(|(e, w)| (e.clone(), Value::Array(vec![w.clone()]))).collect();
        sp.container(&Container::object(root), &[], prepend, vec![Item::Prop("hooks".into(), Value::Object(events))]);
        return Ok(finish(text, sp.finish()));
    };
    if !prepend.is_empty() {
        sp.container(&Container::object(root), &[], prepend, vec![]);
    }
    let Ast::Object(hooks) = hooks_val else { return Err("\"hooks\" is not an object".into()) };
    let mut prop_removed = vec![false; hooks.properties.len()];
    for (pi, p) in hooks.properties.iter().enumerate() {
        let event = p.name.as_str();
        let want = desired.iter().find(|(e, _)| e == event).map(|(_, v)| v);
        let Ast::Array(arr) = &p.value else {
            if want.is_some() {
                return Err(format!("\"hooks.{event}\" is not an array"));
            }
            continue;
        };
        let mut removed = vec![false; arr.elements.len()];
        let mut kept = false;
        for (i, entry) in arr.elements.iter().enumerate() {
            if !command_of(entry).is_some_and(|c| is_ours(harness, c)) {
                continue;
            }
            let plain = matches!(entry, Ast::Object(o) if prop(o, "matcher").is_none());
            match want {
                Some(w) if plain && !kept => {
                    kept = true;
                    if value_of(source, span(entry)).as_ref() != Some(w) {
                        sp.replace_value(span(entry), w);
                    }
                }
                _ => removed[i] = true,
            }
        }
        let any = removed.iter().any(|r| *r);
        match want {
            Some(w) if !kept => sp.container(&Container::array(arr), &removed, vec![], vec![Item::Elem(w.clone())]),
            None if any && removed.iter().all(|r| *r) => prop_removed[pi] = true,
            _ if any => sp.container(&Container::array(arr), &removed, vec![], vec![]),
            _ => {}
        }
    }
    let new_events: Vec<Item> = desired
        .iter()
        .filter(|(e, _)| !hooks.properties.iter().any(|p| p.name.as_str() == e))
        .map(|(e, w)| Item::Prop(e.clone(), Value::Array(vec![w.clone()])))
        .collect();
    sp.container(&Container::object(hooks), &prop_removed, vec![], new_events);
    Ok(finish(text, sp.finish()))
}

/// A new file ends with a newline; an existing one keeps its own ending.
fn finish(original: &str, edited: String) -> String {
    if original.trim().is_empty() && !edited.ends_with('\n') { edited + "\n" } else { edited }
}

/// Our entries found in a parsed config: (event, command).
pub fn our_entries(v: &Value, harness: Harness) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(hooks) = v.get("hooks").and_then(Value::as_object) else { return out };
    for (event, arr) in hooks {
        for item in arr.as_array().into_iter().flatten() {
            let handlers: Vec<&Value> = match item.get("hooks").and_then(Value::as_array) {
                Some(hs) => hs.iter().collect(),
                None => vec![item],
            };
            for h in handlers {
                if let Some(cmd) = h.get("command").and_then(Value::as_str)
                    && is_ours(harness, cmd)
                {
                    out.push((event.clone(), cmd.to_string()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_round_trips() {
        for p in ["/usr/local/bin/preloop-claude-code-stop", "/Users/a b/bin/x", "/it's/x", "/a\"b/c"] {
            assert_eq!(first_word(&shell_quote(p)), p);
        }
        assert_eq!(shell_quote("/usr/bin/x"), "/usr/bin/x");
        assert_eq!(shell_quote("/a b/x"), "'/a b/x'");
        assert_eq!(first_word("\"/a b/x\" --flag"), "/a b/x");
        assert_eq!(first_word("/a\\ b/x arg"), "/a b/x");
        assert!(is_ours(Harness::ClaudeCode, "'/opt/my tools/preloop-claude-code-stop'"));
        assert!(!is_ours(Harness::ClaudeCode, "/opt/preloop-codex-stop"));
        assert!(!is_ours(Harness::ClaudeCode, "echo preloop-claude-code-stop"));
    }
}

#[cfg(test)]
mod splice_tests {
    use super::*;
    use serde_json::json;

    fn want() -> Desired {
        vec![("Stop".to_string(), json!({"type": "command", "command": "/b/preloop-claude-code-stop", "timeout": 20}))]
    }

    #[test]
    fn empty_hooks_object_gets_indented_entries() {
        let text = "{\n  \"hooks\": {}\n}\n";
        let out = edit_grouped(text, Harness::ClaudeCode, &want()).unwrap();
        assert_eq!(
            out,
            "{\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"/b/preloop-claude-code-stop\",\n            \"timeout\": 20\n          }\n        ]\n      }\n    ]\n  }\n}\n"
        );
        // An emptied "hooks" goes too (we cannot tell it was there, empty, before).
        assert_eq!(edit_grouped(&out, Harness::ClaudeCode, &vec![]).unwrap(), "{}\n");
    }

    #[test]
    fn inline_array_gets_an_inline_entry() {
        let text = "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}]}]}}";
        let out = edit_grouped(text, Harness::ClaudeCode, &want()).unwrap();
        assert_eq!(
            out,
            "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}]}, {\"hooks\": [{\"type\": \"command\", \"command\": \"/b/preloop-claude-code-stop\", \"timeout\": 20}]}]}}"
        );
        assert_eq!(edit_grouped(&out, Harness::ClaudeCode, &vec![]).unwrap(), text);
    }
}
