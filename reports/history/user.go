package history

import (
	"errors"
	"io/fs"
	"os"
)

// UserPrefix marks the File of a point read from the user's history folder.
const UserPrefix = "user:"

// All is the built-in history followed by the user's: every *.yaml file
// in userDir (`history import` writes there). A missing folder adds
// nothing; a broken file is reported with the points that did load.
func All(userDir string) ([]Point, error) {
	pts, err := Embedded()
	if userDir == "" {
		return pts, err
	}
	if _, serr := os.Stat(userDir); errors.Is(serr, fs.ErrNotExist) {
		return pts, err
	}
	user, uerr := Load(userDir)
	for i := range user {
		user[i].File = UserPrefix + user[i].File
	}
	return append(pts, user...), errors.Join(err, uerr)
}
