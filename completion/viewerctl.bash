# bash completion for viewerctl -*- shell-script -*-

# File names into COMPREPLY, one per line (so "my photo.jpg" stays one word), marked as file
# names so bash quotes them and adds / to directories. bash-completion's _filedir when present.
_viewerctl_files() {
    if declare -F _filedir >/dev/null; then
        _filedir
        return
    fi
    compopt -o filenames 2>/dev/null
    local IFS=$'\n'
    COMPREPLY=($(compgen -f -- "$cur"))
}

_viewerctl() {
    local cur prev words cword
    _init_completion 2>/dev/null || {
        cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
    }
    local commands="render tile info layout warm stats status invalidate trim clear ping export-xdg help"
    local command="" i
    for ((i = 1; i < cword; i++)); do
        case "${words[i]}" in
            --socket) ((i++)) ;;
            -*) ;;
            *) command="${words[i]}"; break ;;
        esac
    done
    case "$prev" in
        --socket) _viewerctl_files; return ;;
        --mode) COMPREPLY=($(compgen -W "fit fill stretch" -- "$cur")); return ;;
        --crop) COMPREPLY=($(compgen -W "centre attention entropy" -- "$cur")); return ;;
        --colour) COMPREPLY=($(compgen -W "colour gray bitonal" -- "$cur")); return ;;
        --format|-f) COMPREPLY=($(compgen -W "jpeg webp png avif gif raw" -- "$cur")); return ;;
        --priority) COMPREPLY=($(compgen -W "visible high normal prefetch background" -- "$cur")); return ;;
        --size|-s) COMPREPLY=($(compgen -W "128x128 256x256 512x512 1024x1024" -- "$cur")); return ;;
        --tile-size) COMPREPLY=($(compgen -W "256 512" -- "$cur")); return ;;
        --overlap) COMPREPLY=($(compgen -W "0 1" -- "$cur")); return ;;
        --order) COMPREPLY=($(compgen -W "name modified" -- "$cur")); return ;;
        --flavor) COMPREPLY=($(compgen -W "normal large x-large xx-large" -- "$cur")); return ;;
        --cache) _viewerctl_files; return ;;
        --quality|-q|--time|-t|--to|--region|--rotate|--offset|--limit) return ;;
        -o|--output) _viewerctl_files; return ;;
    esac
    if [[ -z "$command" ]]; then
        COMPREPLY=($(compgen -W "$commands --socket --help --version" -- "$cur"))
        return
    fi
    local options=""
    case "$command" in
        render) options="--size --mode --crop --format --quality --time --region --rotate --mirror --colour --priority --cache-only -o --output --help" ;;
        tile) options="--tile-size --overlap --format --quality --rotate --mirror --colour --priority --cache-only -o --output --pyramid --json --help" ;;
        warm) options="--size --mode --crop --format --quality --time --rotate --mirror --colour --priority --recursive --help" ;;
        info) options="--batch --json --help" ;;
        layout) options="--order --offset --limit --json --help" ;;
        export-xdg) options="--flavor --recursive --cache --help" ;;
        stats) options="--json --help" ;;
        status) options="--json --help" ;;
        invalidate) options="--recursive --help" ;;
        trim) options="--to --help" ;;
        *) options="--help" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
    else
        _viewerctl_files
    fi
}
complete -F _viewerctl viewerctl
