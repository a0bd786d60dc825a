//! Which git settings are harmless: the one allow-list of configuration keys that never make
//! git run a program, whatever their value. A setting off the list is treated as one that could
//! (`diff.external`, `diff.<driver>.textconv`, `filter.<driver>.clean`, `gpg.program`,
//! `include.path`, settings a later git adds): deny by default instead of a list of the
//! dangerous ones, which git's drivers (named by the repository) make endless.
//!
//! The classifier judges `git -c key=value` and `git --config-env key=VAR` by it, and the
//! daemon's sandbox shows a command that runs without approval only the listed settings of a
//! repository's config.

/// Keys of a section without a subsection (`[core]`), lower case; `"*"` is every key.
const PLAIN: &[(&str, &[&str])] = &[
    (
        "core",
        &[
            "repositoryformatversion",
            "bare",
            "worktree",
            "filemode",
            "ignorecase",
            "precomposeunicode",
            "symlinks",
            "logallrefupdates",
            "autocrlf",
            "eol",
            "safecrlf",
            "quotepath",
            "abbrev",
            "checkstat",
            "trustctime",
            "untrackedcache",
            "splitindex",
            "sharedrepository",
            "compression",
            "loosecompression",
            "bigfilethreshold",
            "commentchar",
            "commentstring",
            "protectntfs",
            "protecthfs",
            "sparsecheckout",
            "sparsecheckoutcone",
            "warnambiguousrefs",
            "multipackindex",
            "commitgraph",
        ],
    ),
    (
        "extensions",
        &[
            "objectformat",
            "compatobjectformat",
            "refstorage",
            "worktreeconfig",
            "preciousobjects",
            "noop",
        ],
    ),
    ("user", &["name", "email", "useconfigonly"]),
    ("author", &["name", "email"]),
    ("committer", &["name", "email"]),
    ("init", &["defaultbranch"]),
    ("color", &["*"]),
    ("status", &["*"]),
    (
        "log",
        &[
            "date",
            "decorate",
            "abbrevcommit",
            "follow",
            "mailmap",
            "showroot",
            "excludedecoration",
            "initialdecorationset",
        ],
    ),
    (
        "diff",
        &[
            "renames",
            "renamelimit",
            "algorithm",
            "mnemonicprefix",
            "noprefix",
            "relative",
            "context",
            "interhunkcontext",
            "indentheuristic",
            "colormoved",
            "colormovedws",
            "suppressblankempty",
            "statgraphwidth",
            "submodule",
            "ignoresubmodules",
            "dirstat",
            "wserrorhighlight",
        ],
    ),
    ("i18n", &["commitencoding", "logoutputencoding"]),
    ("index", &["version", "threads", "skiphash", "sparse"]),
    ("pull", &["rebase", "ff"]),
    ("push", &["default", "autosetupremote"]),
    ("fetch", &["prune", "prunetags"]),
    ("merge", &["conflictstyle", "ff"]),
];

/// Keys of a section with a subsection (`[remote "origin"]`), lower case; `"*"` is every key.
const WITH_SUBSECTION: &[(&str, &[&str])] = &[
    (
        "remote",
        &[
            "url",
            "pushurl",
            "fetch",
            "push",
            "mirror",
            "tagopt",
            "prune",
            "prunetags",
            "skipdefaultupdate",
            "skipfetchall",
        ],
    ),
    (
        "branch",
        &["remote", "pushremote", "merge", "rebase", "description"],
    ),
    ("submodule", &["url", "path", "active", "branch", "ignore"]),
    ("color", &["*"]),
];

/// Whether the setting `section[.subsection].key` can never make git run a program. The section
/// and key are compared in any case (git ignores their case), the subsection as given.
pub fn git_setting_is_harmless(section: &str, subsection: Option<&str>, key: &str) -> bool {
    let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
    let table = if subsection.is_some() {
        WITH_SUBSECTION
    } else {
        PLAIN
    };
    table
        .iter()
        .find(|(s, _)| *s == section)
        .is_some_and(|(_, keys)| keys.iter().any(|k| *k == "*" || *k == key))
}

/// [`git_setting_is_harmless`] for a dotted name as `git -c` takes it (`remote.origin.url`;
/// the subsection is what lies between the first and the last dot).
pub fn git_key_is_harmless(name: &str) -> bool {
    let Some((section, rest)) = name.split_once('.') else {
        return false;
    };
    match rest.rsplit_once('.') {
        Some((sub, key)) => git_setting_is_harmless(section, Some(sub), key),
        None => git_setting_is_harmless(section, None, rest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_settings_are_harmless() {
        for k in [
            "core.bare",
            "CORE.FileMode",
            "remote.origin.url",
            "remote.a.b.fetch",
            "branch.main.merge",
            "color.ui",
            "color.diff.meta",
            "user.email",
        ] {
            assert!(git_key_is_harmless(k), "{k}");
        }
        for k in [
            "diff.external",
            "diff.x.textconv",
            "diff.x.command",
            "filter.lfs.process",
            "core.fsmonitor",
            "core.pager",
            "core.sshCommand",
            "core.hooksPath",
            "core.editor",
            "gpg.program",
            "include.path",
            "includeIf.gitdir:/x.path",
            "credential.helper",
            "log.showSignature",
            "remote.origin.vcs",
            "remote.origin.uploadpack",
            "extensions.partialclone",
            "alias.st",
            "submodule.x.update",
            "pager.log",
            "core",
            "",
        ] {
            assert!(!git_key_is_harmless(k), "{k}");
        }
    }
}
