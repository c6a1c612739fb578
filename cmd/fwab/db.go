package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fwab/fwab/store"
)

func newDBCmd(io *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Look after the results database",
	}
	var db string
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Bring a results database written by an older fwab up to this fwab's schema",
		Long:  "Bring a results database written by an older fwab up to this fwab's schema.\nReading commands (runs, report, compare) never change a database; this one does, in one transaction.",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Only a database of ours is migrated: a missing or foreign
			// file is refused, not turned into an empty database. A
			// PostgreSQL database made for fwab (createdb) starts empty.
			if st, err := store.OpenReadOnly(cmd.Context(), db); err == nil {
				st.Close()
			} else if !errors.Is(err, store.ErrOlderSchema) && !errors.Is(err, store.ErrNoSchema) {
				return usageError{err}
			}
			st, err := store.Open(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer st.Close()
			fmt.Fprintf(io.Out, "%s: schema version %d\n", st.Location(), store.SchemaVersion())
			return nil
		},
	}
	addDBFlag(migrate.Flags(), &db, "results `database`")
	cmd.AddCommand(migrate)
	return cmd
}

// dbEnv names the results database when --db is not given: a file, or a
// postgres:// URL (which may carry a password here, in the environment,
// but never on the command line).
const dbEnv = "FWAB_DB"

// defaultDB is the results database of a command without --db.
func defaultDB() string {
	if db := os.Getenv(dbEnv); db != "" {
		return db
	}
	return store.DefaultPath()
}

// addDBFlag registers --db, whose default is $FWAB_DB or the SQLite file in
// the user's data folder; the help shows the default without a password.
func addDBFlag(fs *pflag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "db", defaultDB(), usage+": an SQLite file, or a postgres:// URL ($"+dbEnv+")")
	fs.Lookup("db").DefValue = store.Redact(defaultDB())
}

// checkDBFlag refuses a password in a --db URL: the command line is
// visible to every user of the machine (ps, /proc) and lands in shell
// history.
func checkDBFlag(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("db")
	if f == nil || !f.Changed || !store.HasPassword(f.Value.String()) {
		return nil
	}
	return usageErrorf("--db %s: a password on the command line is visible to every user of this machine: "+
		"put it in a file named by password_file= in the URL, or in PGPASSFILE or PGPASSWORD, or pass the whole URL in $%s", store.Redact(f.Value.String()), dbEnv)
}
