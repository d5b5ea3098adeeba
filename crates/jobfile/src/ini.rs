//! The INI dialect of fio job files: `[section]` headers, `key=value` or bare
//! `key` lines, `;`/`#` comments (to the end of the line, wherever they
//! start, as fio cuts them: `filename=/tmp/x#y` is `/tmp/x`), and `${VAR}`
//! environment expansion, and fio's `include FILE` lines (the file's lines
//! read in place, relative to the including file's directory).

use crate::{Origin, RawOption, SpecError};
use std::path::Path;

/// Reads an included job file; `None` where there are no files to include
/// from (text given directly).
pub type Include<'a> = Option<&'a dyn Fn(&Path) -> std::io::Result<String>>;

/// Includes nested deeper than this are refused: a file that includes
/// itself would never end.
const MAX_INCLUDE_DEPTH: usize = 16;

/// One `[name]` section and its options, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub origin: Origin,
    pub options: Vec<RawOption>,
}

impl Section {
    pub fn is_global(&self) -> bool {
        self.name == "global"
    }
}

/// Parse a job file's text. `path` names locations in errors and in the
/// warnings added to `warnings`, and is where `include` paths start from.
pub fn parse(
    text: &str,
    path: &Path,
    include: Include<'_>,
    warnings: &mut Vec<String>,
) -> Result<Vec<Section>, SpecError> {
    let mut sections: Vec<Section> = Vec::new();
    parse_into(text, path, include, 0, &mut sections, warnings)?;
    Ok(sections)
}

fn parse_into(
    text: &str,
    path: &Path,
    include: Include<'_>,
    depth: usize,
    sections: &mut Vec<Section>,
    warnings: &mut Vec<String>,
) -> Result<(), SpecError> {
    for (index, raw_line) in text.lines().enumerate() {
        let origin = Origin::File { path: path.to_path_buf(), line: index + 1 };
        if raw_line.contains('\0') {
            return Err(SpecError::new(origin, "a NUL byte: job files are text"));
        }
        let line = raw_line.split([';', '#']).next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        if let Some(target) = line.strip_prefix("include").filter(|t| t.starts_with([' ', '\t'])).map(str::trim) {
            let read = include.ok_or_else(|| {
                SpecError::new(origin.clone(), format!("include {target}: only a job file read from disk can include"))
            })?;
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(SpecError::new(
                    origin,
                    format!("include {target}: includes nested {MAX_INCLUDE_DEPTH} deep (does a file include itself?)"),
                ));
            }
            let file = path.parent().unwrap_or(Path::new("")).join(target);
            let text = read(&file).map_err(|e| {
                SpecError::new(origin.clone(), format!("include {target}: cannot read {}: {e}", file.display()))
            })?;
            parse_into(&text, &file, include, depth + 1, sections, warnings)?;
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest.strip_suffix(']').map(str::trim).filter(|n| !n.is_empty()).ok_or_else(|| {
                SpecError::new(origin.clone(), format!("malformed section header '{line}' (expected [name])"))
            })?;
            sections.push(Section { name: name.to_string(), origin, options: Vec::new() });
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(expand_env(v.trim(), &origin, warnings)?)),
            None => (line, None),
        };
        if key.is_empty() {
            return Err(SpecError::new(origin, format!("'{line}' has no option name before '='")));
        }
        let section = sections.last_mut().ok_or_else(|| {
            SpecError::new(
                origin.clone(),
                format!("option '{key}' appears before any [section]; put it under [global] or a job"),
            )
        })?;
        section.options.push(RawOption { key: key.to_ascii_lowercase(), value, origin });
    }
    Ok(())
}

/// Replace `${NAME}` with the environment variable's value, as fio does; an
/// unset variable becomes the empty string, as in fio, with a warning
/// (`filename=${DIR}/f` then names `/f`).
fn expand_env(value: &str, origin: &Origin, warnings: &mut Vec<String>) -> Result<String, SpecError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| SpecError::new(origin.clone(), format!("unterminated '${{' in '{value}'")))?;
        let name = &after[..end];
        match std::env::var(name) {
            Ok(var) => out.push_str(&var),
            Err(_) => warnings.push(format!(
                "{origin}: environment variable '{name}' used in '{value}' is not set: expanded to nothing, as fio does"
            )),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Vec<Section>, SpecError> {
        parse(text, Path::new("t.fio"), None, &mut Vec::new())
    }

    /// fio's example: a `[global]` and a job each finished by an included
    /// file of option lines; paths relative to the including file.
    #[test]
    fn includes_read_their_lines_in_place() {
        let read = |p: &Path| match p.to_str().unwrap() {
            "jobs/glob.fio" | "jobs/sub/../glob.fio" => Ok("filesize=1m\n".to_string()),
            "jobs/sub/test.fio" => Ok("bs=4k\ninclude ../glob.fio\n".to_string()),
            "jobs/self.fio" => Ok("include self.fio\n".to_string()),
            _ => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
        };
        let text = "[global]\nfilename=/tmp/t\ninclude glob.fio\n[test]\nrw=randread\ninclude sub/test.fio\n";
        let s = parse(text, Path::new("jobs/main.fio"), Some(&read), &mut Vec::new()).unwrap();
        let keys: Vec<Vec<&str>> = s.iter().map(|s| s.options.iter().map(|o| o.key.as_str()).collect()).collect();
        assert_eq!(keys, [vec!["filename", "filesize"], vec!["rw", "bs", "filesize"]]);
        assert_eq!(s[1].options[1].origin.to_string(), "jobs/sub/test.fio line 1");
        let e = parse("[j]\ninclude self.fio\n", Path::new("jobs/main.fio"), Some(&read), &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("nested 16 deep"), "{e}");
        let e = parse("[j]\ninclude none.fio\n", Path::new("jobs/main.fio"), Some(&read), &mut Vec::new()).unwrap_err();
        assert!(e.to_string().starts_with("jobs/main.fio line 2: include none.fio: cannot read jobs/none.fio"), "{e}");
        let e = p("[j]\ninclude x.fio\n").unwrap_err();
        assert!(e.to_string().contains("only a job file read from disk can include"), "{e}");
    }

    #[test]
    fn sections_options_and_lines() {
        let s = p("; comment\n[global]\nbs = 4k\n\n# other\n[job1]\ntime_based\nRW=write\n").unwrap();
        assert_eq!(s.len(), 2);
        assert!(s[0].is_global());
        assert_eq!(s[0].options[0].key, "bs");
        assert_eq!(s[0].options[0].value.as_deref(), Some("4k"));
        assert_eq!(s[0].options[0].origin.line(), Some(3));
        assert_eq!(s[1].name, "job1");
        assert_eq!(s[1].options[0].value, None);
        assert_eq!(s[1].options[1].key, "rw", "keys are case-insensitive");
        assert_eq!(s[1].options[1].origin.line(), Some(8));
    }

    #[test]
    fn option_outside_section_names_line() {
        let e = p("\nbs=4k\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.fio line 2: option 'bs' appears before any [section]; put it under [global] or a job"
        );
    }

    #[test]
    fn malformed_header() {
        let e = p("[global\n").unwrap_err();
        assert!(e.to_string().starts_with("t.fio line 1: malformed section header"), "{e}");
    }

    #[test]
    fn nul_bytes_are_refused_with_their_line() {
        let e = p("[global]\n[jo\0b]\n").unwrap_err();
        assert_eq!(e.to_string(), "t.fio line 2: a NUL byte: job files are text");
    }

    #[test]
    fn env_expansion() {
        std::env::set_var("DC_JOBFILE_TEST_DIR", "/mnt/x");
        let s = p("[j]\nfilename=${DC_JOBFILE_TEST_DIR}/f\n").unwrap();
        assert_eq!(s[0].options[0].value.as_deref(), Some("/mnt/x/f"));
        let mut warnings = Vec::new();
        let s = parse("[j]\nfilename=${DC_JOBFILE_SURELY_UNSET}/f\n", Path::new("t.fio"), None, &mut warnings).unwrap();
        assert_eq!(s[0].options[0].value.as_deref(), Some("/f"), "unset is empty, as in fio");
        assert!(warnings[0].contains("line 2") && warnings[0].contains("'DC_JOBFILE_SURELY_UNSET'"), "{warnings:?}");
    }

    /// As fio 3.33 reads them (`fio --showcmd`): a comment starts at any
    /// `;` or `#` and runs to the end of the line.
    #[test]
    fn comments_end_lines_wherever_they_start() {
        let s = p("[global]\nbs=8k ; a comment\nsize=1m # another\n[j]\nrw=read  ;x\nfilename=/tmp/x#y\n").unwrap();
        let values: Vec<_> = s.iter().flat_map(|s| &s.options).map(|o| o.value.as_deref().unwrap()).collect();
        assert_eq!(values, ["8k", "1m", "read", "/tmp/x"]);
    }
}
