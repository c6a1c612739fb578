package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

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
			// file is refused, not turned into an empty database.
			if st, err := store.OpenReadOnly(cmd.Context(), db); err == nil {
				st.Close()
			} else if !errors.Is(err, store.ErrOlderSchema) {
				return usageError{err}
			}
			st, err := store.Open(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer st.Close()
			fmt.Fprintf(io.Out, "%s: schema version %d\n", db, store.SchemaVersion())
			return nil
		},
	}
	migrate.Flags().StringVar(&db, "db", store.DefaultPath(), "results database `file`")
	cmd.AddCommand(migrate)
	return cmd
}
