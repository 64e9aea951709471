//! Format-preserving edits of the harnesses' JSON hook configs, and the one
//! walker that finds hook entries in them (install, uninstall and doctor).
//!
//! A file is first parsed strictly (`serde_json`; Gemini's settings may hold
//! `//` and `/* */` comments, which Gemini strips before `JSON.parse`, and so
//! do we); one that does not parse, or that repeats a key on the way to our
//! entries (the harness reads the last, an editor the first), is refused with
//! its line and column. Edits are splices of the original text, computed in
//! one pass over its syntax tree (`jsonc-parser`'s AST, which keeps byte
//! ranges): appending an element inserts `,<separator><element>` after the
//! last one (the separator and indentation copied from the container),
//! removing it deletes exactly that span, so an uninstall after an install
//! gives back the same bytes. An inline container (`[{...}]`) gets an inline
//! element.
//!
//! Why not `jsonc-parser`'s CST (as Deno edits its config): its inserts
//! always lay out a non-empty object over several lines and its removals
//! leave the line breaks they introduced, so a compact or inline file
//! (`{"hooks":{"Stop":[{...}]}}`) does not come back byte for byte after an
//! install and an uninstall, and a CRLF or `{}` file keeps an emptied
//! `"hooks": {}`; `tests/install_files.rs`'s round trips fail with it (tried
//! on 0.34.0). The splicer reproduces them.
//!
//! Ours: an entry whose command is exactly one shell word (no arguments)
//! naming one of our binaries for that harness, in any directory; inside a
//! user's group with a matcher, only one in the directory we install to
//! (a same-named program of the user's, with its own arguments or matcher,
//! is the user's and is left alone).

use crate::hook_rows;
use jsonc_parser::ast::{Array, Object, Value as Ast};
use jsonc_parser::{CollectOptions, CommentCollectionStrategy, ParseOptions, parse_to_ast};
use preloop_shared::Harness;
use serde_json::Value;
use std::path::Path;

/// Why a config cannot be edited (shown with the file's path).
pub type EditError = String;

/// What a harness's own loader accepts in its hook file: its dialect's
/// answers (`Dialect::syntax`), handed in, so this module never looks a
/// harness up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Syntax {
    /// `//` and `/* */` comments (Gemini CLI strips them before parsing).
    pub comments: bool,
    /// Every event name the harness knows there, where one unknown name
    /// voids the file (we never write a name outside it).
    pub known_events: Option<&'static [&'static str]>,
}

/// The line (1-based) of byte offset `pos`.
fn line_of(text: &str, pos: usize) -> usize {
    text[..pos.min(text.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

/// `text` with every comment replaced by spaces (line breaks kept, so
/// positions stay), as Gemini's `strip-json-comments` does.
fn strip_comments(text: &str) -> Result<String, EditError> {
    let opts = CollectOptions { comments: CommentCollectionStrategy::Separate, tokens: false };
    let parsed = parse_to_ast(text, &opts, &ParseOptions::default()).map_err(|e| e.to_string())?;
    let mut bytes = text.as_bytes().to_vec();
    for list in parsed.comments.iter().flat_map(|m| m.values()) {
        for c in list.iter() {
            let r = match c {
                jsonc_parser::ast::Comment::Line(l) => l.range,
                jsonc_parser::ast::Comment::Block(b) => b.range,
            };
            for b in bytes.iter_mut().take(r.end).skip(r.start) {
                if *b != b'\n' && *b != b'\r' {
                    *b = b' ';
                }
            }
        }
    }
    // Whole multi-byte characters were blanked byte by byte: still UTF-8.
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// Parse strictly; the error names line and column (once).
pub fn parse_strict(text: &str) -> Result<Value, EditError> {
    serde_json::from_str::<Value>(text).map_err(|e| {
        let msg = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let msg = msg.strip_suffix(&suffix).unwrap_or(&msg);
        format!("line {}, column {}: {msg}", e.line(), e.column())
    })
}

/// Parse a config as its harness reads it (`syntax`): strict JSON, plus
/// comments where the harness allows them. Duplicate keys in the root or
/// under `"hooks"` are refused. An empty file is `{}`.
pub fn parse_config(text: &str, syntax: Syntax) -> Result<Value, EditError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let stripped;
    let source = if syntax.comments {
        stripped = strip_comments(text)?;
        &stripped
    } else {
        text
    };
    let v = parse_strict(source)?;
    let ast = parse_ast(text)?;
    if let Some(Ast::Object(root)) = &ast {
        check_duplicates(text, root, true)?;
    }
    Ok(v)
}

/// Refuse an object that repeats a key: the harness (`JSON.parse`, serde)
/// keeps the last, so an edit of the first would be lost. In the root only
/// `hooks` and `version` matter; under `hooks` every key does.
fn check_duplicates(text: &str, o: &Object, root: bool) -> Result<(), EditError> {
    for (i, p) in o.properties.iter().enumerate() {
        let name = p.name.as_str();
        if o.properties[..i].iter().any(|q| q.name.as_str() == name) && (!root || matches!(name, "hooks" | "version")) {
            return Err(format!(
                "line {}: the key {name:?} appears twice in one object; the harness reads only the last one, so an edit could be lost (merge them into one)",
                line_of(text, p.range.start)
            ));
        }
        if root && name != "hooks" {
            continue;
        }
        check_nested(text, &p.value)?;
    }
    Ok(())
}

fn check_nested(text: &str, v: &Ast) -> Result<(), EditError> {
    match v {
        Ast::Object(o) => check_duplicates(text, o, false),
        Ast::Array(a) => a.elements.iter().try_for_each(|e| check_nested(text, e)),
        _ => Ok(()),
    }
}

/// Quote a path for the POSIX shell every harness runs hook commands with
/// (`shlex`). Plain paths stay bare.
pub fn shell_quote(s: &str) -> String {
    shlex::try_quote(s).map(|c| c.into_owned()).unwrap_or_else(|_| format!("'{}'", s.replace('\'', r"'\''")))
}

/// The words of a shell command (`shlex`), `None` when its quoting is broken.
pub fn words(cmd: &str) -> Option<Vec<String>> {
    shlex::split(cmd)
}

/// The program of a command: its first shell word.
pub fn program_of(cmd: &str) -> String {
    words(cmd).and_then(|w| w.into_iter().next()).unwrap_or_default()
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or("")
}

/// Who owns which entries: our binaries for `harness`, installed to `hook_dir`.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    pub harness: Harness,
    pub hook_dir: &'a Path,
}

impl<'a> Owner<'a> {
    pub fn new(harness: Harness, hook_dir: &'a Path) -> Owner<'a> {
        Owner { harness, hook_dir }
    }

    /// Our binary a command runs, if the command is exactly one word naming it.
    pub fn binary_of(&self, cmd: &str) -> Option<&'static str> {
        let w = words(cmd)?;
        let [prog] = w.as_slice() else { return None };
        let name = basename(prog);
        hook_rows::hooks_for(self.harness).map(|d| d.binary).find(|b| *b == name)
    }

    /// Whether an entry with this command (in a group with a matcher or
    /// not) is ours.
    pub fn owns(&self, cmd: &str, in_matcher_group: bool) -> bool {
        if self.binary_of(cmd).is_none() {
            return false;
        }
        !in_matcher_group || Path::new(&program_of(cmd)).parent() == Some(self.hook_dir)
    }

    /// A command whose program is named like one of ours but that is not
    /// ours (arguments, another directory under a matcher).
    pub fn looks_like_ours(&self, cmd: &str, in_matcher_group: bool) -> bool {
        let name = basename(&program_of(cmd)).to_string();
        !self.owns(cmd, in_matcher_group) && hook_rows::hooks_for(self.harness).any(|d| d.binary == name)
    }
}

/// One hook entry of a config file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub event: String,
    /// Grouped configs: the group's index in the event's array.
    pub group: Option<usize>,
    /// The entry's index (in the group's `hooks`, or in the event's array).
    pub index: usize,
    /// Its group has a `matcher` (or the flat entry has one).
    pub matcher: bool,
    pub command: String,
    /// The entry object itself.
    pub value: Value,
}

impl Entry {
    /// Its `timeout` (`timeoutSec` for Copilot), if a number.
    pub fn timeout(&self) -> Option<u64> {
        self.value.get("timeout").or_else(|| self.value.get("timeoutSec")).and_then(Value::as_u64)
    }
}

/// A handler's command (`command`, or Copilot's `bash`).
fn command_of_value(v: &Value) -> Option<&str> {
    v.get("command").or_else(|| v.get("bash")).and_then(Value::as_str)
}

/// Every hook entry of a parsed config, in file order: grouped
/// (`{"hooks": {"E": [{"matcher"?, "hooks": [h, ..]}]}}`) and flat
/// (`{"hooks": {"E": [h, ..]}}`) alike.
pub fn entries(doc: &Value) -> Vec<Entry> {
    let mut out = Vec::new();
    let Some(hooks) = doc.get("hooks").and_then(Value::as_object) else { return out };
    for (event, arr) in hooks {
        for (gi, item) in arr.as_array().into_iter().flatten().enumerate() {
            let matcher = item.get("matcher").is_some_and(|m| !m.is_null());
            match item.get("hooks").and_then(Value::as_array) {
                Some(hs) => {
                    for (hi, h) in hs.iter().enumerate() {
                        if let Some(cmd) = command_of_value(h) {
                            out.push(Entry {
                                event: event.clone(),
                                group: Some(gi),
                                index: hi,
                                matcher,
                                command: cmd.to_string(),
                                value: h.clone(),
                            });
                        }
                    }
                }
                None => {
                    if let Some(cmd) = command_of_value(item) {
                        out.push(Entry {
                            event: event.clone(),
                            group: None,
                            index: gi,
                            matcher,
                            command: cmd.to_string(),
                            value: item.clone(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// Our entries in a parsed config.
pub fn our_entries(doc: &Value, owner: &Owner) -> Vec<Entry> {
    entries(doc).into_iter().filter(|e| owner.owns(&e.command, e.matcher)).collect()
}

/// Entries named like ours that are the user's (left alone).
pub fn lookalikes(doc: &Value, owner: &Owner) -> Vec<Entry> {
    entries(doc).into_iter().filter(|e| owner.looks_like_ours(&e.command, e.matcher)).collect()
}

/// Entries installed by Preloop's own CLI (`preloop agents onboard
/// --approvals`: `preloop agents permission-hook …`, `preloop usage hook …`)
/// or reading its onboarding files: with ours they check every tool call
/// twice and claim notes twice.
pub fn preloop_own_entries(doc: &Value) -> Vec<Entry> {
    entries(doc)
        .into_iter()
        .filter(|e| {
            let c = &e.command;
            c.contains("agents permission-hook") || c.contains("usage hook") || c.contains("permission_hook.json")
        })
        .collect()
}

/// What we want in a file: per event, the entry (grouped: the handler
/// object; flat: the entry). Empty means uninstall.
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
        if serde::Serialize::serialize(v, &mut ser).is_err() {
            return inline(v);
        }
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
        if let (false, Some(last)) = (post.is_empty(), kept.last()) {
            let last = c.elems[*last].1;
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
fn same_binary(owner: &Owner, command: &str, want: &Value) -> bool {
    let w = want.get("command").and_then(Value::as_str).and_then(|w| owner.binary_of(w));
    w.is_some() && w == owner.binary_of(command)
}

fn parse_ast(text: &str) -> Result<Option<Ast<'_>>, EditError> {
    let opts = CollectOptions { comments: CommentCollectionStrategy::Off, tokens: false };
    parse_to_ast(text, &opts, &ParseOptions::default()).map(|r| r.value).map_err(|e| e.to_string())
}

/// Claude Code `settings.json`, Codex `hooks.json`, Gemini `settings.json`:
/// `{"hooks": {"<Event>": [{"matcher"?: .., "hooks": [<handler>, ..]}, ..]}}`.
/// Our handler sits alone in a group without a matcher, appended after the
/// user's groups.
pub fn edit_grouped(text: &str, owner: &Owner, desired: &Desired, syntax: Syntax) -> Result<String, EditError> {
    let fresh = text.trim().is_empty();
    if fresh && desired.is_empty() {
        return Ok(text.to_string());
    }
    let source = if fresh { "{}" } else { text };
    parse_config(source, syntax)?;
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
            let has_matcher = matches!(prop(go, "matcher"), Some((_, v)) if !matches!(v, Ast::NullKeyword(_)));
            let plain = !has_matcher && handlers.elements.len() == 1;
            let mut handler_removed = vec![false; handlers.elements.len()];
            for (hi, h) in handlers.elements.iter().enumerate() {
                let Some(cmd) = command_of(h).filter(|c| owner.owns(c, has_matcher)) else { continue };
                // The wanted entry for the same binary, if not placed yet.
                let slot = want.iter().enumerate().position(|(wi, w)| !kept[wi] && same_binary(owner, cmd, w));
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
pub fn edit_flat(text: &str, owner: &Owner, desired: &Desired, syntax: Syntax) -> Result<String, EditError> {
    let fresh = text.trim().is_empty();
    if fresh && desired.is_empty() {
        return Ok(text.to_string());
    }
    for (e, _) in desired {
        if syntax.known_events.is_some_and(|k| !k.contains(&e.as_str())) {
            return Err(format!("internal: {e} is not an event {} knows", owner.harness.name()));
        }
    }
    let source = if fresh { "{}" } else { text };
    parse_config(source, syntax)?;
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
            let has_matcher = matches!(entry, Ast::Object(o) if prop(o, "matcher").is_some());
            if !command_of(entry).is_some_and(|c| owner.owns(c, has_matcher)) {
                continue;
            }
            match want {
                Some(w) if !has_matcher && !kept => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect;
    use serde_json::json;

    const DIR: &str = "/opt/my tools";

    fn syntax(h: Harness) -> Syntax {
        dialect::of(h).syntax()
    }

    fn owner() -> Owner<'static> {
        Owner::new(Harness::ClaudeCode, Path::new(DIR))
    }

    #[test]
    fn quoting_round_trips() {
        for p in ["/usr/local/bin/preloop-claude-code-stop", "/Users/a b/bin/x", "/it's/x", "/a\"b/c", "/a\nb/$(x)`y`"]
        {
            assert_eq!(words(&shell_quote(p)).unwrap(), vec![p.to_string()], "{p}");
        }
        assert_eq!(shell_quote("/usr/bin/x"), "/usr/bin/x");
        assert_eq!(program_of("\"/a b/x\" --flag"), "/a b/x");
        assert_eq!(program_of("/a\\ b/x arg"), "/a b/x");
    }

    #[test]
    fn ours_is_the_whole_command() {
        let o = owner();
        assert!(o.owns("'/opt/my tools/preloop-claude-code-stop'", false));
        assert!(o.owns("/elsewhere/preloop-claude-code-stop", false), "a stale install in another directory");
        assert!(!o.owns("/opt/preloop-codex-stop", false), "another harness's binary");
        assert!(!o.owns("echo preloop-claude-code-stop", false));
        assert!(!o.owns("/opt/team-tools/preloop-claude-code-stop --audit-only", false), "arguments: the user's");
        assert!(o.looks_like_ours("/opt/team-tools/preloop-claude-code-stop --audit-only", false));
        assert!(!o.owns("/opt/team-tools/preloop-claude-code-pre-tool-use", true), "under a matcher, elsewhere");
        assert!(o.owns("'/opt/my tools/preloop-claude-code-pre-tool-use'", true), "under a matcher, ours");
        assert!(!o.owns("'unbalanced", false));
    }

    #[test]
    fn duplicate_hooks_key_is_refused() {
        let text = "{\"hooks\": {\"Stop\": []},\n \"hooks\": {\"PreToolUse\": []}}\n";
        let err = edit_grouped(text, &owner(), &want(), syntax(Harness::ClaudeCode)).unwrap_err();
        assert!(err.contains("line 2") && err.contains("\"hooks\" appears twice"), "{err}");
        let text = "{\"hooks\": {\"Stop\": [{\"hooks\": [], \"hooks\": []}]}}";
        assert!(edit_grouped(text, &owner(), &want(), syntax(Harness::ClaudeCode)).is_err());
        // Elsewhere in the file a repeated key is not ours to judge.
        let text = "{\"env\": {\"A\": \"1\", \"A\": \"2\"}}";
        assert!(edit_grouped(text, &owner(), &want(), syntax(Harness::ClaudeCode)).is_ok());
    }

    #[test]
    fn parse_errors_name_the_position_once() {
        let e = parse_strict("{\n  \"a\": ,\n}").unwrap_err();
        assert_eq!(e, "line 2, column 8: expected value");
    }

    #[test]
    fn gemini_comments_are_allowed_and_kept() {
        let o = Owner::new(Harness::Gemini, Path::new("/b"));
        let text = "{\n  // my settings\n  \"model\": {\"name\": \"x\"} /* inline */\n}\n";
        let want =
            vec![("AfterAgent".to_string(), json!({"type": "command", "command": "/b/preloop-gemini-after-agent"}))];
        let out = edit_grouped(text, &o, &want, syntax(Harness::Gemini)).unwrap();
        assert!(out.contains("// my settings") && out.contains("/* inline */"), "{out}");
        assert_eq!(our_entries(&parse_config(&out, syntax(Harness::Gemini)).unwrap(), &o).len(), 1);
        assert_eq!(edit_grouped(&out, &o, &vec![], syntax(Harness::Gemini)).unwrap(), text);
        // Claude Code's settings take no comments.
        assert!(parse_config(text, syntax(Harness::ClaudeCode)).is_err());
        // Trailing commas are still refused (Gemini's JSON.parse does).
        assert!(parse_config("{\"a\": 1,}", syntax(Harness::Gemini)).is_err());
    }

    fn want() -> Desired {
        vec![("Stop".to_string(), json!({"type": "command", "command": "/b/preloop-claude-code-stop", "timeout": 20}))]
    }

    #[test]
    fn empty_hooks_object_gets_indented_entries() {
        let text = "{\n  \"hooks\": {}\n}\n";
        let out = edit_grouped(text, &owner(), &want(), syntax(Harness::ClaudeCode)).unwrap();
        assert_eq!(
            out,
            "{\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"/b/preloop-claude-code-stop\",\n            \"timeout\": 20\n          }\n        ]\n      }\n    ]\n  }\n}\n"
        );
        // An emptied "hooks" goes too (we cannot tell it was there, empty, before).
        assert_eq!(edit_grouped(&out, &owner(), &vec![], syntax(Harness::ClaudeCode)).unwrap(), "{}\n");
    }

    #[test]
    fn inline_array_gets_an_inline_entry() {
        let text = "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}]}]}}";
        let out = edit_grouped(text, &owner(), &want(), syntax(Harness::ClaudeCode)).unwrap();
        assert_eq!(
            out,
            "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}]}, {\"hooks\": [{\"type\": \"command\", \"command\": \"/b/preloop-claude-code-stop\", \"timeout\": 20}]}]}}"
        );
        assert_eq!(edit_grouped(&out, &owner(), &vec![], syntax(Harness::ClaudeCode)).unwrap(), text);
    }

    /// No input makes the editor panic: every prefix of a realistic file,
    /// and bytes swapped for JSON's special characters, give a result or
    /// an error.
    #[test]
    fn no_input_panics() {
        let base = "{\n  \"hooks\": {\n    \"Stop\": [{\"matcher\": \"\", \"hooks\": [{\"type\": \"command\", \"command\": \"/b/preloop-claude-code-stop\"}]}],\n    \"PreToolUse\": [{\"hooks\": [{\"command\": \"x\"}, {\"command\": \"/o/preloop-claude-code-pre-tool-use\"}]}]\n  },\n  \"version\": 1 // c\n}\r\n";
        let specials = ['{', '}', '[', ']', ',', ':', '"', '\\', '/', '*', ' ', '\n', 'é'];
        let cursor = Owner::new(Harness::Cursor, Path::new("/b"));
        let gemini = Owner::new(Harness::Gemini, Path::new("/b"));
        let mut inputs: Vec<String> =
            (0..=base.len()).filter(|i| base.is_char_boundary(*i)).map(|i| base[..i].to_string()).collect();
        for (i, _) in base.char_indices() {
            for s in specials {
                let mut t = base.to_string();
                let c = t[i..].chars().next().unwrap();
                t.replace_range(i..i + c.len_utf8(), &s.to_string());
                inputs.push(t);
            }
        }
        for t in &inputs {
            for w in [want(), vec![]] {
                let _ = edit_grouped(t, &owner(), &w, syntax(Harness::ClaudeCode));
                let _ = edit_grouped(t, &gemini, &w, syntax(Harness::Gemini));
                let _ = edit_flat(t, &cursor, &w, syntax(Harness::Cursor));
            }
            if let Ok(v) = parse_config(t, syntax(Harness::Gemini)) {
                let _ = entries(&v);
            }
        }
    }
}
