//! Go's `flag`/`pflag` argument conventions, rewritten into what clap
//! parses: one or two dashes, `_` and `-` equivalent in names.

/// Rewrites Go-style arguments into the form clap parses: `-flag` becomes
/// `--flag`, and `_` in a flag name becomes `-` (pflag's normalisation).
pub fn normalize_args<I: IntoIterator<Item = String>>(args: I) -> Vec<String> {
    let mut out = Vec::new();
    let mut after_terminator = false;
    for (i, arg) in args.into_iter().enumerate() {
        if i == 0 || after_terminator || !arg.starts_with('-') || arg == "-" {
            out.push(arg);
            continue;
        }
        if arg == "--" {
            after_terminator = true;
            out.push(arg);
            continue;
        }
        let body = arg.trim_start_matches('-');
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        // Short options clap knows (-h, -V) stay as they are.
        if arg.len() == 2 && !arg.starts_with("--") {
            out.push(arg);
            continue;
        }
        let name = name.replace('_', "-");
        out.push(match value {
            Some(v) => format!("--{name}={v}"),
            None => format!("--{name}"),
        });
    }
    out
}
