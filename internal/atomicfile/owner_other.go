//go:build !unix

package atomicfile

import "io/fs"

func keepOwner(path string, st fs.FileInfo) error { return nil }
