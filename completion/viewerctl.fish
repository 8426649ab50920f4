# fish completion for viewerctl. `make install` puts it in share/fish/vendor_completions.d;
# from the checkout: source completion/viewerctl.fish
# The commands and options are those of completion/viewerctl.bash (DocsAgreementTests).

set -l commands render tile info layout warm stats status invalidate trim clear ping export-xdg help
complete -c viewerctl -f
complete -c viewerctl -n "not __fish_seen_subcommand_from $commands" -a "$commands"
complete -c viewerctl -n "not __fish_seen_subcommand_from $commands" -l socket -r -F -d "the daemon's socket"
complete -c viewerctl -n "not __fish_seen_subcommand_from $commands" -l version -d "print the version"

# Declares OPTIONS for COMMAND, each with what its value completes to.
function __viewerctl_command_options -a command
    for option in $argv[2..-1]
        set -l name (string replace -r -- '^-+' '' $option)
        set -l flag -l
        string match -q -- '--*' $option; or set flag -s
        set -l when "__fish_seen_subcommand_from $command"
        switch $option
            case --mode
                complete -c viewerctl -n $when $flag $name -x -a "fit fill stretch"
            case --crop
                complete -c viewerctl -n $when $flag $name -x -a "centre attention entropy"
            case --colour
                complete -c viewerctl -n $when $flag $name -x -a "colour gray bitonal"
            case --format
                complete -c viewerctl -n $when $flag $name -x -a "jpeg webp png avif gif raw"
            case --priority
                complete -c viewerctl -n $when $flag $name -x -a "visible high normal prefetch background"
            case --size
                complete -c viewerctl -n $when $flag $name -x -a "128x128 256x256 512x512 1024x1024"
            case --tile-size
                complete -c viewerctl -n $when $flag $name -x -a "256 512"
            case --overlap
                complete -c viewerctl -n $when $flag $name -x -a "0 1"
            case --flavor
                complete -c viewerctl -n $when $flag $name -x -a "normal large x-large xx-large"
            case --quality --time --to --region --rotate
                complete -c viewerctl -n $when $flag $name -x
            case -o --output --cache
                complete -c viewerctl -n $when $flag $name -r -F
            case '*'
                complete -c viewerctl -n $when $flag $name
        end
    end
    # The command's paths
    complete -c viewerctl -n "__fish_seen_subcommand_from $command" -F
end

__viewerctl_command_options render --size --mode --crop --format --quality --time --region --rotate --mirror --colour --priority --cache-only -o --output --help
__viewerctl_command_options tile --tile-size --overlap --format --quality --rotate --mirror --colour --priority --cache-only -o --output --pyramid --json --help
__viewerctl_command_options warm --size --mode --crop --format --quality --time --rotate --mirror --colour --priority --recursive --help
__viewerctl_command_options info --batch --json --help
__viewerctl_command_options layout --order --offset --limit --json --help
__viewerctl_command_options export-xdg --flavor --recursive --cache --help
__viewerctl_command_options stats --json --help
__viewerctl_command_options status --json --help
__viewerctl_command_options invalidate --recursive --help
__viewerctl_command_options trim --to --help
__viewerctl_command_options clear --help
__viewerctl_command_options ping --help
__viewerctl_command_options help --help
