package fwapi

import "strings"

// ShellQuote returns s as one POSIX shell word that the shell takes
// literally: the whole value inside single quotes, each single quote written
// as '\” (close, escaped quote, reopen). Nothing inside single quotes is
// special to sh, so $(...), backticks, ;, newlines and globs stay text.
// Every value fwab puts into a remote command line goes through here.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if isShellSafe(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// shellJoin quotes each word and joins them with spaces.
func shellJoin(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = ShellQuote(w)
	}
	return strings.Join(q, " ")
}

// isShellSafe reports whether s needs no quoting: only characters that are
// never special to sh in any position of a word.
func isShellSafe(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("/._-+,:@%", r):
		default:
			return false
		}
	}
	return true
}
