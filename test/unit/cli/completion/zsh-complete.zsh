# zsh -f zsh-complete.zsh FPATH-DIR DIR OUT LINE: zsh as a terminal runs it (in a pty, with
# compinit and FPATH-DIR's _agentctl), in DIR, LINE typed and TAB pressed. Prints the names zsh
# offers, as a compadd in front of the builtin records them in OUT (the calls _files and
# _describe make to gather names, with -O, -A or -D, add nothing and are passed through). Waits for
# the completion to finish (its comppostfuncs writes --done--); zpty -d ends the interactive zsh.
zmodload zsh/zpty
fpathdir=$1 dir=$2 out=$3 line=$4
: >"$out"
zpty z 'zsh -f -i'
zpty -w z "fpath=(${(q)fpathdir} \$fpath); autoload -Uz compinit; compinit -u -D; cd ${(q)dir}"
zpty -w z 'compadd() {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi
  local -a hits
  builtin compadd -O hits "$@"
  (( $#hits )) && print -rl -- $hits >> '${(q)out}'
  builtin compadd "$@"
}'
zpty -w z '_done() { print -r -- --done-- >> '${(q)out}' }; comppostfuncs=(_done)'
zpty -n -w z "$line"$'\t'
for i in {1..600}; do
  grep -qx -- --done-- "$out" && break
  sleep 0.1
done
zpty -d z
grep -qx -- --done-- "$out" || { print -u2 "zsh-complete.zsh: no completion for: $line"; exit 1 }
grep -vx -- --done-- "$out"
exit 0
