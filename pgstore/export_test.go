package pgstore

import "github.com/jackc/pgx/v5/pgxpool"

// Pool returns the pool the store works through.
func Pool(s *Store) *pgxpool.Pool { return s.pool }

// MigrationCount is the number of embedded migrations.
func MigrationCount() int {
	ms, err := migrations()
	if err != nil {
		panic(err)
	}
	return len(ms)
}
